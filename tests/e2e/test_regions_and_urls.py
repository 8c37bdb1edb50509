"""GIVEN the real local server (`python -m dmqlocal`, DynamoDB Local) with nothing configured
WHEN boto3 clients sign for regions nobody configured, and name queues by URLs in every
form SQS SDKs send THEN each region is a namespace of its own, made on first use; every
URL form and a bare queue name reach the queue; returned URLs point at the host and port
the client used; and an SQS client speaking the Query protocol (botocore 1.29) sees the
same."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import (
    CLIENT_CONFIG,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ClientFactory,
    launch,
)

ROOT = Path(__file__).resolve().parents[2]
QUERY_PYTHON = ROOT / ".venv-query" / "bin" / "python"
ACCOUNT = "000000000000"
Names = Callable[[str], str]


def _arn(client: Any, url: str) -> str:
    return str(client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"])


def test_two_unconfigured_regions_are_isolated(make_sqs: ClientFactory,
                                               unique_name: Names) -> None:
    # GIVEN clients signed for two regions nobody configured, and one queue name
    ireland, sydney = make_sqs(region_name="eu-west-1"), make_sqs(region_name="ap-southeast-2")
    name = unique_name("jobs")
    # WHEN each creates that queue
    url_ie = ireland.create_queue(QueueName=name)["QueueUrl"]
    url_au = sydney.create_queue(QueueName=name)["QueueUrl"]
    # THEN each is its region's, with its region in its ARN
    assert _arn(ireland, url_ie) == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{name}"
    assert _arn(sydney, url_au) == f"arn:aws:sqs:ap-southeast-2:{ACCOUNT}:{name}"
    # WHEN one region's client sends THEN the other region's queue stays empty
    ireland.send_message(QueueUrl=url_ie, MessageBody="for ireland")
    assert sydney.receive_message(QueueUrl=url_au).get("Messages") is None
    # AND the sending region counts and delivers it (its back end runs)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        counts = ireland.get_queue_attributes(
            QueueUrl=url_ie, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        if counts["ApproximateNumberOfMessages"] == "1":
            break
        time.sleep(0.2)
    assert counts["ApproximateNumberOfMessages"] == "1"
    got = ireland.receive_message(QueueUrl=url_ie, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["for ireland"]
    # AND ListQueues lists each region's own; the default region has neither
    assert ireland.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url_ie]
    assert sydney.list_queues(QueueNamePrefix=name)["QueueUrls"] == [url_au]
    assert make_sqs().list_queues(QueueNamePrefix=name).get("QueueUrls") is None


def test_a_junk_region_is_refused_as_sqs_refuses_it(make_sqs: ClientFactory) -> None:
    # botocore refuses to sign for a name that is no host label ("../"); "xx" it signs
    client = make_sqs(region_name="xx")
    with pytest.raises(ClientError) as caught:
        client.list_queues()
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Error"]["Code"] == "SignatureDoesNotMatch"
    assert error["Error"]["Message"].startswith(
        "Credential should be scoped to a valid region, not 'xx'.")


def test_every_url_form_reaches_the_queue(make_sqs: ClientFactory, dmq_url: str,
                                          unique_name: Names) -> None:
    # GIVEN a queue in eu-west-1, reached by its client at localhost instead of 127.0.0.1
    port = dmq_url.rsplit(":", 1)[1]
    client = make_sqs(endpoint_url=f"http://localhost:{port}", region_name="eu-west-1")
    name = unique_name("forms")
    url = client.create_queue(QueueName=name)["QueueUrl"]
    # THEN the URL it got points at the host and port it used, and names its region
    assert url == f"http://localhost:{port}/queue/eu-west-1/{ACCOUNT}/{name}"
    forms = [
        f"http://127.0.0.1:{port}/{ACCOUNT}/{name}",
        f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/{name}",
        f"http://sqs.eu-west-1.localhost.localstack.cloud:4566/{ACCOUNT}/{name}",
        f"http://localhost:4566/queue/eu-west-1/{ACCOUNT}/{name}",
        name,
    ]
    # WHEN a message is sent by each form THEN the queue holds them all
    for form in forms:
        client.send_message(QueueUrl=form, MessageBody=form)
    bodies: set[str] = set()
    deadline = time.monotonic() + 10
    while len(bodies) < len(forms) and time.monotonic() < deadline:
        got = client.receive_message(QueueUrl=name, MaxNumberOfMessages=10,
                                     WaitTimeSeconds=1).get("Messages", [])
        bodies |= {m["Body"] for m in got}
    assert bodies == set(forms)
    # AND a URL naming a region by its host is served in that region, whoever signs
    assert _arn(make_sqs(region_name="us-east-1"), forms[2]) == (
        f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{name}")


def test_a_queue_outside_the_servers_region_has_a_url_naming_it(
        make_sqs: ClientFactory, dmq_url: str, unique_name: Names) -> None:
    # GIVEN one queue name in the server's own region (us-east-1) and in eu-west-1
    virginia, ireland = make_sqs(), make_sqs(region_name="eu-west-1")
    name = unique_name("twins")
    home = virginia.create_queue(QueueName=name)["QueueUrl"]
    url = ireland.create_queue(QueueName=name)["QueueUrl"]
    # THEN the two URLs differ: eu-west-1's names its region, the server's is as before
    assert home == f"{dmq_url}/{ACCOUNT}/{name}"
    assert url == f"{dmq_url}/queue/eu-west-1/{ACCOUNT}/{name}"
    # AND every action that returns queue URLs returns that form
    assert ireland.get_queue_url(QueueName=name)["QueueUrl"] == url
    arn = _arn(ireland, url)
    source = ireland.create_queue(QueueName=f"{name}-src", Attributes={"RedrivePolicy":
        json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "2"})})["QueueUrl"]
    assert source == f"{dmq_url}/queue/eu-west-1/{ACCOUNT}/{name}-src"
    assert sorted(ireland.list_queues(QueueNamePrefix=name)["QueueUrls"]) == [url, source]
    assert ireland.list_dead_letter_source_queues(QueueUrl=url)["queueUrls"] == [source]
    assert virginia.list_queues(QueueNamePrefix=name)["QueueUrls"] == [home]
    # WHEN a client of the server's region sends by each URL THEN each queue gets its own
    virginia.send_message(QueueUrl=url, MessageBody="to ireland")
    virginia.send_message(QueueUrl=home, MessageBody="to virginia")
    # AND so does a client whose endpoint is the queue's URL (the SDKs that post to it)
    make_sqs(endpoint_url=url).send_message(QueueUrl=url, MessageBody="at the url")
    # AND a Query form posted at the URL, unsigned
    parsed = urlparse(url)
    connection = http.client.HTTPConnection(str(parsed.hostname), parsed.port, timeout=10)
    connection.request("POST", parsed.path, body=urlencode({
        "Action": "SendMessage", "MessageBody": "query at the url", "Version": "2012-11-05"}),
        headers={"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    assert response.status == 200, response.read()
    connection.close()

    def bodies(client: Any, queue: str, count: int) -> list[str]:
        got: list[str] = []
        deadline = time.monotonic() + 10
        while len(got) < count and time.monotonic() < deadline:
            got += [m["Body"] for m in client.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])]
        return sorted(got)

    assert bodies(ireland, url, 3) == ["at the url", "query at the url", "to ireland"]
    assert bodies(virginia, home, 1) == ["to virginia"]
    # AND the plain form still names the region the request is signed for
    ireland.send_message(QueueUrl=home, MessageBody="plain")
    assert bodies(ireland, name, 1) == ["plain"]


@pytest.mark.skipif(not QUERY_PYTHON.exists(), reason="run `make query-client` first")
def test_the_query_protocol_client_sees_the_same(dmq_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DMQ_"))}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    done = subprocess.run(
        [str(QUERY_PYTHON), "-m", "tests.query_client.regions", "--endpoint", dmq_url,
         "--prefix", f"query-regions-{os.getpid()}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["protocol"] == "query"
    # the URLs name each region (neither is the server's own), over Query as over JSON
    assert seen["urls"] == {region: f"{dmq_url}/queue/{region}/{ACCOUNT}/{seen['name']}"
                            for region in ("eu-west-1", "ap-southeast-2")}
    assert seen["got_url"] == seen["urls"]["eu-west-1"]
    assert seen["listed"] == [seen["urls"]["eu-west-1"]]
    assert seen["arns"] == {"eu-west-1": f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{seen['name']}",
                            "ap-southeast-2":
                                f"arn:aws:sqs:ap-southeast-2:{ACCOUNT}:{seen['name']}"}
    assert seen["other_region_got"] == []
    assert sorted(seen["received"]) == sorted(seen["sent"])
    assert seen["missing_bare_name"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_query_requests_at_a_path_style_queue_url(make_sqs: ClientFactory, dmq_url: str,
                                                  unique_name: Names) -> None:
    # GIVEN a queue in ap-southeast-2
    sydney = make_sqs(region_name="ap-southeast-2")
    name = unique_name("path")
    sydney.create_queue(QueueName=name)
    # WHEN a Query form is posted to LocalStack's path-style URL, which names the region
    host, port = urlparse(dmq_url).hostname, urlparse(dmq_url).port
    connection = http.client.HTTPConnection(str(host), port, timeout=10)
    connection.request("POST", f"/queue/ap-southeast-2/{ACCOUNT}/{name}",
                       body=urlencode({"Action": "SendMessage", "MessageBody": "by path",
                                       "Version": "2012-11-05"}),
                       headers={"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    # THEN it is served there, in XML
    assert response.status == 200, text
    assert "<SendMessageResponse" in text
    got = sydney.receive_message(QueueUrl=name, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["by path"]


def test_with_any_region_off_the_server_refuses_other_regions() -> None:
    # GIVEN the local server with DMQ_ANY_REGION=off (what a deployed stage does)
    server = launch(DMQ_ANY_REGION="off")
    try:
        assert server.wait_ready(START_TIMEOUT_S), server.output
        client = boto3.client("sqs", endpoint_url=server.url, region_name="eu-west-1",
                              aws_access_key_id="k", aws_secret_access_key="s",
                              config=CLIENT_CONFIG)
        # WHEN a client signs for a region outside DMQ_REGIONS THEN it is refused
        with pytest.raises(ClientError) as caught:
            client.list_queues()
        assert caught.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
        assert "not 'eu-west-1'" in caught.value.response["Error"]["Message"]
    finally:
        assert server.stop(STOP_TIMEOUT_S) == 0, server.output
    assert "Traceback" not in server.output, server.output
