"""GIVEN a deployment serving the regions of DMQ_REGIONS WHEN a request is signed for
another region THEN it is refused as AWS refuses a credential scoped to a region the
endpoint does not serve (403 SignatureDoesNotMatch), and nothing is created there."""

from __future__ import annotations

import json

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client

from app import runtime
from chalicelib.domain.queues import queue_id_of
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
