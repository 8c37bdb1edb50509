"""GIVEN the real local server WHEN boto3 drives AddPermission, RemovePermission and the
message-level details over HTTP THEN they answer as SQS does: the Policy attribute, the
MessageSystemAttributeNames parameter, AWSTraceHeader from the X-Amzn-Trace-Id header, and
DeadLetterQueueSourceArn on a message moved to a DLQ."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

ACCOUNT = "000000000000"
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
Names = Callable[[str], str]


def _arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"])


def test_add_and_remove_permission_edit_the_policy(sqs: Any, unique_name: Names) -> None:
    url = sqs.create_queue(QueueName=unique_name())["QueueUrl"]
    arn = _arn(sqs, url)
    sqs.add_permission(QueueUrl=url, Label="AliceSendMessage", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage", "ReceiveMessage"])
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])[
        "Attributes"]["Policy"])
    assert policy == {
        "Version": "2008-10-17", "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [{"Sid": "AliceSendMessage", "Effect": "Allow",
                       "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
                       "Action": ["SQS:SendMessage", "SQS:ReceiveMessage"], "Resource": arn}],
    }
    # A second AddPermission with the same label is refused
    with pytest.raises(ClientError) as caught:
        sqs.add_permission(QueueUrl=url, Label="AliceSendMessage",
                           AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        "Value AliceSendMessage for parameter Label is invalid. Reason: Already exists.")
    # Eight actions are over SQS's limit of seven: OverLimit, HTTP 403
    with pytest.raises(sqs.exceptions.OverLimit) as over:
        sqs.add_permission(QueueUrl=url, Label="many", AWSAccountIds=["111122223333"],
                           Actions=["SendMessage"] * 8)
    assert over.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert over.value.response["Error"]["Message"] == (
        "8 Actions were found, maximum allowed is 7.")
    # RemovePermission of the last label leaves no Policy; again, the label is unknown
    sqs.remove_permission(QueueUrl=url, Label="AliceSendMessage")
    assert "Policy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"]
    with pytest.raises(ClientError) as gone:
        sqs.remove_permission(QueueUrl=url, Label="AliceSendMessage")
    assert gone.value.response["Error"]["Message"] == (
        "Value AliceSendMessage for parameter Label is invalid. Reason: can't find label.")


def test_message_system_attribute_names_and_the_trace_header(
    make_sqs: Callable[..., Any], unique_name: Names,
) -> None:
    # GIVEN a client whose requests carry X-Amzn-Trace-Id (as an X-Ray SDK adds it)
    sqs = make_sqs()
    url = sqs.create_queue(QueueName=unique_name())["QueueUrl"]

    def add(request: Any, **kwargs: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = TRACE

    sqs.meta.events.register("before-sign.sqs.SendMessage", add)
    sqs.meta.events.register("before-sign.sqs.SendMessageBatch", add)
    sent = sqs.send_message(QueueUrl=url, MessageBody="one")
    assert "MD5OfMessageSystemAttributes" not in sent
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "b", "MessageBody": "two"}])
    # WHEN received with MessageSystemAttributeNames
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                              MessageSystemAttributeNames=["AWSTraceHeader", "SenderId"])
    # THEN each message carries the header as AWSTraceHeader, and only what was asked for
    assert sorted(m["Body"] for m in got["Messages"]) == ["one", "two"]
    for message in got["Messages"]:
        assert message["Attributes"] == {"AWSTraceHeader": TRACE, "SenderId": ACCOUNT}
    # AND the newer parameter decides when both are given
    both = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, AttributeNames=["All"],
                               MessageSystemAttributeNames=["SentTimestamp"])
    assert set(both["Messages"][0]["Attributes"]) == {"SentTimestamp"}


def test_a_dead_lettered_message_names_its_source_queue(sqs: Any, unique_name: Names) -> None:
    # GIVEN a queue that moves a message to its DLQ on the second receive
    dlq = sqs.create_queue(QueueName=unique_name("dlq"))["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 1})
    source = sqs.create_queue(QueueName=unique_name("src"),
                              Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    assert len(sqs.receive_message(QueueUrl=source, VisibilityTimeout=0)["Messages"]) == 1
    # WHEN the next receive moves it
    assert "Messages" not in sqs.receive_message(QueueUrl=source)
    # THEN received from the DLQ it carries DeadLetterQueueSourceArn = the source queue's ARN
    moved = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=5,
                                MessageSystemAttributeNames=["DeadLetterQueueSourceArn"])
    (message,) = moved["Messages"]
    assert message["Body"] == "poison"
    assert message["Attributes"] == {"DeadLetterQueueSourceArn": _arn(sqs, source)}


def test_an_older_receipt_handle_acts_on_the_redelivered_message(
    sqs: Any, unique_name: Names,
) -> None:
    # GIVEN a message received twice: first with VisibilityTimeout=0, then for 60 s
    url = sqs.create_queue(QueueName=unique_name())["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="twice")
    (first,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=5)[
        "Messages"]
    (second,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60, WaitTimeSeconds=5)[
        "Messages"]
    assert second["MessageId"] == first["MessageId"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    # WHEN the first handle ends the current receive's visibility THEN it is visible again
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=0)
    (third,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=60, WaitTimeSeconds=5)[
        "Messages"]
    # WHEN the first handle deletes it THEN it is gone, and the latest handle still succeeds
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    assert attributes == {"ApproximateNumberOfMessages": "0",
                          "ApproximateNumberOfMessagesNotVisible": "0"}
    # AND a garbled handle is refused in SQS's words
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid) as caught:
        sqs.delete_message(QueueUrl=url, ReceiptHandle="garbled")
    assert caught.value.response["Error"]["Message"] == (
        'The input receipt handle "garbled" is not a valid receipt handle.')
