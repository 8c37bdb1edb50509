"""GIVEN a queue WHEN a client names it by a QueueUrl in any form SQS SDKs send (DMQ's own,
AWS's regional host, LocalStack's hosts and path style, a bare queue name) THEN every
form reaches the same queue, over JSON and over Query; the URLs DMQ returns point at the
host and port the client used, or at DMQ_PUBLIC_URL's fixed form; and a URL that names
no queue is SQS's QueueDoesNotExist, never a 500."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import app, runtime
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from infra import provision
from tests.clocks import FakeClock
from tests.conftest import sqs_client

ACCOUNT = "000000000000"
NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
FORMS = [
    f"http://127.0.0.1:9324/{ACCOUNT}/jobs",
    f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/jobs",
    f"http://sqs.us-east-1.localhost.localstack.cloud:4566/{ACCOUNT}/jobs",
    f"http://us-east-1.queue.localhost.localstack.cloud:4566/{ACCOUNT}/jobs",
    f"http://localhost:4566/queue/us-east-1/{ACCOUNT}/jobs",
    f"http://localhost:4566/{ACCOUNT}/jobs",
    "jobs",
]


def _json(dmq: Client, action: str, body: dict[str, Any], host: str = "dmq.test") -> Any:
    response = dmq.http.post("/", headers={
        "X-Amz-Target": f"AmazonSQS.{action}", "Content-Type": "application/x-amz-json-1.0",
        "Host": host}, body=json.dumps(body))
    return response.status_code, json.loads(response.body)


@pytest.mark.parametrize("url", FORMS)
def test_every_form_of_the_url_reaches_the_queue(sqs: Any, url: str) -> None:
    # GIVEN a queue WHEN a message is sent with the URL in this form
    created = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=f"via {url}")
    # THEN the queue holds it, and the same form receives and deletes it
    got = sqs.receive_message(QueueUrl=url)["Messages"]
    assert [m["Body"] for m in got] == [f"via {url}"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert sqs.get_queue_attributes(QueueUrl=created, AttributeNames=["All"])["Attributes"][
        "ApproximateNumberOfMessagesNotVisible"] == "0"


def test_a_bare_name_resolves_in_the_callers_account_and_region(sqs: Any) -> None:
    sqs.create_queue(QueueName="jobs")
    sqs.send_message(QueueUrl="jobs", MessageBody="bare")
    assert sqs.get_queue_attributes(QueueUrl="jobs", AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:jobs"
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl="missing", MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


@pytest.mark.parametrize("url", [
    "http://[::1/000000000000/jobs", "http://h/jobs", "", "not a name", "a/b/c d",
    f"http://h/{ACCOUNT}/{'x' * 200}",
])
def test_a_url_that_names_no_queue_is_queue_does_not_exist(dmq: Client, url: str) -> None:
    status, body = _json(dmq, "SendMessage", {"QueueUrl": url, "MessageBody": "x"})
    assert status == 400
    assert body["__type"].endswith("QueueDoesNotExist")


def test_returned_urls_point_at_the_host_and_port_the_client_used(dmq: Client) -> None:
    # WHEN clients reach DMQ by two host names THEN each gets URLs at its own
    status, body = _json(dmq, "CreateQueue", {"QueueName": "hosts"}, host="localhost:4566")
    assert status == 200 and body["QueueUrl"] == f"http://localhost:4566/{ACCOUNT}/hosts"
    status, body = _json(dmq, "GetQueueUrl", {"QueueName": "hosts"}, host="127.0.0.1:9324")
    assert body["QueueUrl"] == f"http://127.0.0.1:9324/{ACCOUNT}/hosts"
    status, body = _json(dmq, "ListQueues", {}, host="[::1]:9324")
    assert body["QueueUrls"] == [f"http://[::1]:9324/{ACCOUNT}/hosts"]
    # AND a Host header that is not a host is not echoed into a URL
    status, body = _json(dmq, "GetQueueUrl", {"QueueName": "hosts"}, host="evil/<x>")
    assert body["QueueUrl"] == f"http://localhost/{ACCOUNT}/hosts"


@pytest.fixture
def public(aws: Clients, clock: FakeClock) -> Iterator[Client]:
    """The app with DMQ_PUBLIC_URL in LocalStack's form and any region served."""
    yield from _serving(clock, "http://sqs.{region}.localhost.localstack.cloud:4566")


@pytest.fixture
def regions(aws: Clients, clock: FakeClock) -> Iterator[Client]:
    """The app serving any region (as the local server does), no DMQ_PUBLIC_URL."""
    yield from _serving(clock, None)


def _serving(clock: FakeClock, public_url: str | None) -> Iterator[Client]:
    settings = Settings(metadata_cache_seconds=0.0, any_region=True, public_url=public_url)

    def open_region(region: str) -> None:
        clients = Clients(settings, region)
        provision.create_all(clients.dynamodb, clients.s3, region=region)

    runtime.configure(settings, clock)
    runtime.open_client_regions(open_region)
    with Client(app) as client:
        yield client
    runtime.configure(None)


def test_a_public_url_fixes_the_form_and_names_the_region(public: Client) -> None:
    # GIVEN DMQ_PUBLIC_URL with {region} WHEN a client in eu-west-1 creates a queue
    ireland = sqs_client(public, "eu-west-1")
    url = ireland.create_queue(QueueName="jobs")["QueueUrl"]
    # THEN its URL has the fixed form, with the queue's region
    assert url == f"http://sqs.eu-west-1.localhost.localstack.cloud:4566/{ACCOUNT}/jobs"
    # AND the URL's region serves it whatever region another client signs for
    virginia = sqs_client(public, "us-east-1")
    virginia.send_message(QueueUrl=url, MessageBody="by url")
    assert [m["Body"] for m in ireland.receive_message(QueueUrl="jobs")["Messages"]] == [
        "by url"]
    # AND a URL naming a region with no such queue is QueueDoesNotExist there
    with pytest.raises(ClientError) as caught:
        virginia.send_message(QueueUrl=url.replace("eu-west-1", "ap-south-1"),
                              MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def _signed_for(region: str) -> dict[str, str]:
    """A SigV4 Authorization header scoped to `region` (auth is open: it is not checked)."""
    return {"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/"
            f"{region}/sqs/aws4_request, SignedHeaders=host, Signature=00"}


def _query_in(dmq: Client, region: str | None, path: str = "/", host: str = "dmq.test",
              **params: str) -> Any:
    """A Query request signed for `region` (None: unsigned), its XML answer."""
    result = dmq.http.post(path, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Host": host,
        **(_signed_for(region) if region else {})},
        body=urlencode({"Version": "2012-11-05", **params}))
    root = ET.fromstring(result.body)
    assert result.status_code == 200, ET.tostring(root)
    return root


def _dead_letter_source(client: Any, target_url: str, name: str) -> str:
    arn = client.get_queue_attributes(QueueUrl=target_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    return str(client.create_queue(QueueName=name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": "3"})})["QueueUrl"])


def test_json_urls_name_a_region_other_than_the_servers(regions: Client) -> None:
    # GIVEN one queue name in the server's region and in eu-west-1
    virginia, ireland = sqs_client(regions, "us-east-1"), sqs_client(regions, "eu-west-1")
    home = virginia.create_queue(QueueName="jobs")["QueueUrl"]
    url = ireland.create_queue(QueueName="jobs")["QueueUrl"]
    # THEN the server's region keeps the plain form, and eu-west-1's URL names its region
    assert home == f"http://dmq.test/{ACCOUNT}/jobs"
    assert url == f"http://dmq.test/queue/eu-west-1/{ACCOUNT}/jobs"
    # AND every action that returns a queue URL returns that form
    assert ireland.create_queue(QueueName="jobs")["QueueUrl"] == url  # it exists already
    assert ireland.get_queue_url(QueueName="jobs")["QueueUrl"] == url
    assert ireland.list_queues()["QueueUrls"] == [url]
    source = _dead_letter_source(ireland, url, "source")
    assert source == f"http://dmq.test/queue/eu-west-1/{ACCOUNT}/source"
    assert ireland.list_dead_letter_source_queues(QueueUrl=url)["queueUrls"] == [source]
    assert virginia.list_queues()["QueueUrls"] == [home]
    # WHEN a client signed for the server's region sends by that URL THEN eu-west-1 has it
    virginia.send_message(QueueUrl=url, MessageBody="to ireland")
    assert [m["Body"] for m in ireland.receive_message(QueueUrl="jobs")["Messages"]] == [
        "to ireland"]
    assert virginia.receive_message(QueueUrl=home).get("Messages") is None
    # AND a plain URL still means the region the request is signed for (URLs given before)
    ireland.send_message(QueueUrl=f"http://dmq.test/{ACCOUNT}/jobs", MessageBody="plain")
    assert [m["Body"] for m in ireland.receive_message(QueueUrl=url)["Messages"]] == [
        "plain"]


def test_query_urls_name_a_region_other_than_the_servers(regions: Client) -> None:
    ireland = sqs_client(regions, "eu-west-1")

    def urls(root: Any, element: str) -> list[str]:
        return [e.text or "" for e in root.iter(f"{NS}{element}")]

    # GIVEN a Query client signed for eu-west-1 WHEN it creates a queue
    url = urls(_query_in(regions, "eu-west-1", Action="CreateQueue", QueueName="jobs"),
               "QueueUrl")
    # THEN its URL names the region, as over JSON; the server's region's is plain
    assert url == [f"http://dmq.test/queue/eu-west-1/{ACCOUNT}/jobs"]
    assert urls(_query_in(regions, "us-east-1", Action="CreateQueue", QueueName="jobs"),
                "QueueUrl") == [f"http://dmq.test/{ACCOUNT}/jobs"]
    # AND GetQueueUrl, ListQueues and ListDeadLetterSourceQueues return it too
    assert urls(_query_in(regions, "eu-west-1", Action="GetQueueUrl", QueueName="jobs"),
                "QueueUrl") == url
    assert urls(_query_in(regions, "eu-west-1", Action="ListQueues"), "QueueUrl") == url
    source = _dead_letter_source(ireland, url[0], "source")
    path = f"/queue/eu-west-1/{ACCOUNT}/jobs"
    # (posted at the queue's URL, unsigned: the path names the queue and its region)
    assert urls(_query_in(regions, None, path, Action="ListDeadLetterSourceQueues"),
                "QueueUrl") == [source]
    # WHEN a message is posted at the URL by a client of the server's region
    _query_in(regions, "us-east-1", path, Action="SendMessage", MessageBody="at the url")
    # THEN eu-west-1's queue has it
    assert [m["Body"] for m in ireland.receive_message(QueueUrl="jobs")["Messages"]] == [
        "at the url"]


@pytest.mark.parametrize(("public_url", "ireland", "virginia"), [
    ("http://queues.example:9324", "http://queues.example:9324/queue/eu-west-1",
     "http://queues.example:9324"),
    ("https://queues.example/prod", "https://queues.example/prod/queue/eu-west-1",
     "https://queues.example/prod"),
    ("http://localhost:4566/queue/{region}", "http://localhost:4566/queue/eu-west-1",
     "http://localhost:4566/queue/us-east-1"),
    ("http://sqs.{region}.localhost.localstack.cloud:4566",
     "http://sqs.eu-west-1.localhost.localstack.cloud:4566",
     "http://sqs.us-east-1.localhost.localstack.cloud:4566"),
])
def test_a_public_url_names_the_region_once(aws: Clients, clock: FakeClock, public_url: str,
                                            ireland: str, virginia: str) -> None:
    # GIVEN DMQ_PUBLIC_URL in this form
    for dmq in _serving(clock, public_url):
        clients = {region: sqs_client(dmq, region) for region in ("eu-west-1", "us-east-1")}
        # WHEN the same queue name is made in two regions THEN each URL names its region
        # once: in the path when the fixed form does not already name it
        got = {region: c.create_queue(QueueName="jobs")["QueueUrl"]
               for region, c in clients.items()}
        assert got == {"eu-west-1": f"{ireland}/{ACCOUNT}/jobs",
                       "us-east-1": f"{virginia}/{ACCOUNT}/jobs"}
        # AND a client of the server's region reaches either queue by its URL
        clients["us-east-1"].send_message(QueueUrl=got["eu-west-1"], MessageBody="ie")
        clients["us-east-1"].send_message(QueueUrl=got["us-east-1"], MessageBody="us")
        for region, body in (("eu-west-1", "ie"), ("us-east-1", "us")):
            assert [m["Body"] for m in clients[region].receive_message(
                QueueUrl="jobs")["Messages"]] == [body]


def test_a_host_naming_another_region_gets_the_region_in_the_path(regions: Client) -> None:
    # GIVEN a client at LocalStack's regional host for eu-west-1
    host = "sqs.eu-west-1.localhost.localstack.cloud:4566"

    def create(region: str) -> str:
        response = regions.http.post("/", headers={
            "X-Amz-Target": "AmazonSQS.CreateQueue", "Host": host,
            "Content-Type": "application/x-amz-json-1.0", **_signed_for(region)},
            body=json.dumps({"QueueName": "jobs"}))
        return str(json.loads(response.body)["QueueUrl"])

    # WHEN it signs for eu-west-1 THEN the host names the region already
    assert create("eu-west-1") == f"http://{host}/{ACCOUNT}/jobs"
    # WHEN it signs for the server's region THEN the path says so (the host would not)
    assert create("us-east-1") == f"http://{host}/queue/us-east-1/{ACCOUNT}/jobs"
    # AND a Query request posted at the host's URL is served in the host's region, as
    # that URL given as a QueueUrl parameter is
    _query_in(regions, "us-east-1", f"/{ACCOUNT}/jobs", host, Action="SendMessage",
              MessageBody="at the host")
    ireland = sqs_client(regions, "eu-west-1")
    assert [m["Body"] for m in ireland.receive_message(QueueUrl="jobs")["Messages"]] == [
        "at the host"]


def test_a_deployed_stage_ignores_a_region_it_does_not_serve_in_a_url(sqs: Any) -> None:
    # GIVEN a stage serving us-east-1 only, and a URL whose host names another region
    sqs.create_queue(QueueName="jobs")
    url = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/jobs"
    # THEN the path names the queue in the region the request is signed for
    sqs.send_message(QueueUrl=url, MessageBody="here")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl="jobs")["Messages"]] == ["here"]


def _query(dmq: Client, path: str, **params: str) -> tuple[int, Any]:
    result = dmq.http.post(path, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Host": "localhost:4566"},
        body=urlencode({"Version": "2012-11-05", **params}))
    return result.status_code, ET.fromstring(result.body)


def test_query_requests_at_a_queue_url_in_either_path_style(dmq: Client, sqs: Any) -> None:
    # GIVEN a queue WHEN Query requests are sent to its URL, plain or LocalStack's path style
    sqs.create_queue(QueueName="jobs")
    for path in (f"/{ACCOUNT}/jobs", f"/queue/us-east-1/{ACCOUNT}/jobs"):
        status, root = _query(dmq, path, Action="SendMessage", MessageBody=path)
        assert status == 200, ET.tostring(root)
    # AND with a bare name in the form
    status, root = _query(dmq, "/", Action="SendMessage", QueueUrl="jobs", MessageBody="bare")
    assert status == 200, ET.tostring(root)
    # THEN all three reached it
    bodies = set()
    for _ in range(3):
        got = sqs.receive_message(QueueUrl="jobs", MaxNumberOfMessages=10).get("Messages", [])
        bodies |= {m["Body"] for m in got}
    assert bodies == {f"/{ACCOUNT}/jobs", f"/queue/us-east-1/{ACCOUNT}/jobs", "bare"}
    # AND an account action at a queue's URL is refused as SQS refuses it
    status, root = _query(dmq, f"/queue/us-east-1/{ACCOUNT}/jobs", Action="ListQueues")
    assert status == 400
    assert root.findtext(f"{NS}Error/{NS}Code") == "InvalidAction"


def test_a_forwarded_host_counts_only_from_a_trusted_proxy(dmq: Client) -> None:
    # GIVEN no trusted proxy WHEN a client claims another host THEN its Host header counts
    def create(headers: dict[str, str]) -> str:
        response = dmq.http.post("/", headers={
            "X-Amz-Target": "AmazonSQS.CreateQueue", "Host": "dmq.test",
            "Content-Type": "application/x-amz-json-1.0", **headers},
            body=json.dumps({"QueueName": "proxied"}))
        return str(json.loads(response.body)["QueueUrl"])
    spoof = {"X-Forwarded-Host": "evil.example:443", "X-Forwarded-Proto": "https"}
    assert create(spoof) == f"http://dmq.test/{ACCOUNT}/proxied"
    # GIVEN a trusted proxy WHEN it names the host the client used THEN the URLs use it
    runtime.configure(replace(runtime.settings, trusted_proxies=("127.0.0.0/8",)),
                      runtime.clock)
    assert create({"X-Forwarded-Host": "sqs.example.com", "X-Forwarded-Proto": "https"}) == (
        f"https://sqs.example.com/{ACCOUNT}/proxied")
    assert create({"Forwarded": "host=queues.example:8443;proto=https"}) == (
        f"https://queues.example:8443/{ACCOUNT}/proxied")
