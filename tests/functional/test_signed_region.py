"""GIVEN a deployed stage serving the regions of DMQ_REGIONS WHEN a request is signed for
another region THEN it is refused as AWS refuses a credential scoped to a region the
endpoint does not serve (403 SignatureDoesNotMatch), and nothing is created there.

GIVEN the local server (any region served) WHEN clients sign for regions nobody
configured THEN each region is a namespace of its own, opened on first use: the same
queue name in two regions is two queues, with their region in their ARNs; a junk region
name is still refused with SQS's error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import app, runtime
from chalicelib.aws import Clients
from chalicelib.domain.queues import queue_id_of
from chalicelib.settings import Settings
from infra import provision
from tests.clocks import FakeClock
from tests.conftest import sqs_client

ACCOUNT = "000000000000"
NO_RETRIES = Config(retries={"total_max_attempts": 1})


@pytest.mark.parametrize("action", ["create", "send"])
def test_a_request_signed_for_an_unknown_region_is_refused(dmq: Client, action: str) -> None:
    # GIVEN a queue in the deployment's region, and a client signing for another region
    home = sqs_client(dmq, "us-east-1")
    url = home.create_queue(QueueName="known")["QueueUrl"]
    stranger = sqs_client(dmq, "eu-central-1", NO_RETRIES)
    # WHEN it creates a queue or sends to the existing one
    with pytest.raises(ClientError) as caught:
        if action == "create":
            stranger.create_queue(QueueName="elsewhere")
        else:
            stranger.send_message(QueueUrl=url, MessageBody="hello")
    # THEN it gets AWS's answer for a credential scoped to a region it does not serve
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["Error"]["Code"] == "SignatureDoesNotMatch"
    assert "Credential should be scoped to a valid region, not 'eu-central-1'" in (
        error["Error"]["Message"])
    # AND nothing was created or sent
    assert home.list_queues().get("QueueUrls") == [url]
    assert home.receive_message(QueueUrl=url).get("Messages") is None


def test_an_unsigned_request_is_served_by_the_default_region(dmq: Client) -> None:
    # GIVEN a request with no SigV4 signature
    response = dmq.http.post("/", headers={
        "X-Amz-Target": "AmazonSQS.CreateQueue",
        "Content-Type": "application/x-amz-json-1.0", "Host": "dmq.test",
    }, body=json.dumps({"QueueName": "unsigned"}))
    # THEN the default region serves it
    assert response.status_code == 200, response.body
    home = sqs_client(dmq, "us-east-1")
    arn = home.get_queue_attributes(QueueUrl=json.loads(response.body)["QueueUrl"],
                                    AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn.startswith("arn:aws:sqs:us-east-1:")


def test_a_queue_homed_in_an_unknown_region_earlier_is_still_served(dmq: Client) -> None:
    # GIVEN a queue whose record names a home outside the deployment (as requests signed
    # for such a region made them before they were refused)
    home = sqs_client(dmq, "us-east-1")
    url = home.create_queue(QueueName="stray")["QueueUrl"]
    repo = runtime.backend().repo
    record = repo.get(queue_id_of(ACCOUNT, "stray"), fresh=True)
    assert record is not None
    repo.save(record.with_changes(home_region="eu-central-1"))
    # WHEN a request signed for a served region uses it THEN the local region serves it
    home.send_message(QueueUrl=url, MessageBody="still here")
    assert [m["Body"] for m in home.receive_message(QueueUrl=url)["Messages"]] == ["still here"]


# -- the local server: any region, each its own namespace ---------------------------------
class LocalClient(Client):
    """The test client, with the regions the runtime opened."""

    opened: list[str]


@pytest.fixture
def local(aws: Clients, clock: FakeClock) -> Iterator[LocalClient]:
    """The app as the local server runs it: any region served, a new region's tables
    provisioned when it is opened."""
    settings = Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0, any_region=True)
    opened: list[str] = []

    def open_region(region: str) -> None:
        clients = Clients(settings, region)
        provision.create_all(clients.dynamodb, clients.s3, region=region)
        opened.append(region)

    runtime.configure(settings, clock)
    runtime.open_client_regions(open_region)
    with LocalClient(app) as client:
        client.opened = opened
        yield client
    runtime.configure(None)


def test_two_unconfigured_regions_are_isolated_namespaces(local: LocalClient) -> None:
    # GIVEN clients signed for two regions nobody configured
    ireland = sqs_client(local, "eu-west-1")
    sydney = sqs_client(local, "ap-southeast-2")
    # WHEN each creates a queue of the same name
    url_ie = ireland.create_queue(QueueName="jobs")["QueueUrl"]
    url_au = sydney.create_queue(QueueName="jobs")["QueueUrl"]
    # THEN each queue's ARN carries its client's region
    def arn(client: Any, url: str) -> str:
        return str(client.get_queue_attributes(
            QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])

    assert arn(ireland, url_ie) == f"arn:aws:sqs:eu-west-1:{ACCOUNT}:jobs"
    assert arn(sydney, url_au) == f"arn:aws:sqs:ap-southeast-2:{ACCOUNT}:jobs"
    # WHEN one sends THEN only its region's queue holds the message
    ireland.send_message(QueueUrl=url_ie, MessageBody="for ireland")
    assert sydney.receive_message(QueueUrl=url_au).get("Messages") is None
    got = ireland.receive_message(QueueUrl=url_ie)["Messages"]
    assert [m["Body"] for m in got] == ["for ireland"]
    # AND ListQueues lists each region's own, and the default region has none of them
    assert ireland.list_queues()["QueueUrls"] == [url_ie]
    assert sydney.list_queues()["QueueUrls"] == [url_au]
    assert sqs_client(local, "us-east-1").list_queues().get("QueueUrls") is None
    # AND each region was opened once, for its first request
    assert local.opened == ["eu-west-1", "ap-southeast-2"]
    assert runtime.served_regions() == ("us-east-1", "eu-west-1", "ap-southeast-2")


def test_a_client_region_replicates_nowhere(local: LocalClient) -> None:
    # GIVEN a client region WHEN a queue there asks for a replica in the configured region
    ireland = sqs_client(local, "eu-west-1", NO_RETRIES)
    with pytest.raises(ClientError) as caught:
        ireland.create_queue(QueueName="replicated",
                             Attributes={"DmqReplicaRegions": "us-east-1"})
    # THEN it is refused: a region used only by clients is a plain namespace
    assert caught.value.response["Error"]["Code"] == "InvalidAttributeValue"


@pytest.mark.parametrize("region", ["xx", "..", "eu-west-1-x-y-z", "EU-WEST-1"])
def test_a_junk_region_is_still_refused(local: LocalClient, region: str) -> None:
    # GIVEN the local server WHEN a request's credential names no region shape
    auth = (f"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261125/{region}/sqs/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0123")
    response = local.http.post("/", headers={
        "X-Amz-Target": "AmazonSQS.CreateQueue", "Authorization": auth,
        "Content-Type": "application/x-amz-json-1.0", "Host": "dmq.test",
    }, body=json.dumps({"QueueName": "junk"}))
    # THEN SQS's refusal comes back, in its shape, and no region was opened
    assert response.status_code == 403, response.body
    body = json.loads(response.body)
    assert body["__type"].endswith("SignatureDoesNotMatch")
    assert body["message"].startswith(
        f"Credential should be scoped to a valid region, not '{region}'.")
    assert response.headers["x-amzn-query-error"] == "SignatureDoesNotMatch;Sender"
    assert local.opened == []
