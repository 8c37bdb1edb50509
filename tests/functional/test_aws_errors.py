"""GIVEN requests SQS refuses WHEN DMQ answers them, over JSON and over Query THEN the code,
the HTTP status and the message are AWS's own: those AWS-validated snapshot tests record
(LocalStack's tests/aws/services/sqs), the SQS API reference and SQS's answers as clients
quote them. Over JSON botocore reports the legacy code of x-amzn-query-error as `Code` and
the `__type` as `QueryErrorCode`, as AWS's JSON errors carry both."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client

from tests.functional.test_query_protocol import ACCOUNT, FORM, NS, create, error_of

ALLOWED = ("the set of allowed characters is #x9 | #xA | #xD | [#x20-#xD7FF] | "
           "[#xE000-#xFFFD] | [#x10000-#x10FFFF].")
DUMMY_REDRIVE = json.dumps({"deadLetterTargetArn": "dummy", "maxReceiveCount": 42})
DLQ_ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}:dlq"
ZERO_REDRIVE = json.dumps({"deadLetterTargetArn": DLQ_ARN, "maxReceiveCount": 0})
NO_COUNT_REDRIVE = json.dumps({"deadLetterTargetArn": DLQ_ARN})
NO_TARGET_REDRIVE = json.dumps({"maxReceiveCount": 5})
# A task handle (base64 of the task's id and source ARN) naming another account's queue.
OTHER_ACCOUNT_HANDLE = base64.b64encode(json.dumps({
    "taskId": "9f0c2a4e-0000-4000-8000-000000000000",
    "sourceArn": "arn:aws:sqs:us-east-1:111111111111:their-dlq"}).encode()).decode()
FIFO_ENTRY = {"Id": "a", "MessageBody": "x", "MessageDeduplicationId": "d"}
PERMISSION = {"Label": "crossaccountpermission", "AWSAccountIds": ["111111111111"],
              "Actions": ["ReceiveMessage"]}

Call = Callable[[Any, dict[str, str]], object]
# (id, the refused call, Code, QueryErrorCode (the JSON __type), HTTP status, message)
CASES: list[tuple[str, Call, str, str, int, str]] = [
    ("tag-none", lambda s, q: s.tag_queue(QueueUrl=q["std"], Tags={}),
     "MissingParameter", "MissingRequiredParameterException", 400,
     "The request must contain the parameter Tags."),
    ("tag-51", lambda s, q: s.tag_queue(QueueUrl=q["std"], Tags={
        f"k{i}": "v" for i in range(51)}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Too many tags added for queue errors."),
    ("tag-over-50-in-all", lambda s, q: (
        s.tag_queue(QueueUrl=q["std"], Tags={f"k{i}": "v" for i in range(50)}),
        s.tag_queue(QueueUrl=q["std"], Tags={"one-more": "v"})),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Too many tags added for queue errors."),
    ("create-tags-51", lambda s, q: s.create_queue(QueueName="tagged", tags={
        f"k{i}": "v" for i in range(51)}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Too many tags added for queue tagged."),
    ("untag-none", lambda s, q: s.untag_queue(QueueUrl=q["std"], TagKeys=[]),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Tag keys must be between 1 and 128 characters in length."),
    ("tag-key-129", lambda s, q: s.tag_queue(QueueUrl=q["std"], Tags={"k" * 129: "v"}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Tag keys must be between 1 and 128 characters in length."),
    ("unknown-attribute", lambda s, q: s.get_queue_attributes(
        QueueUrl=q["std"], AttributeNames=["QueueArn", "not-existing"]),
     "InvalidAttributeName", "InvalidAttributeName", 400, "Unknown Attribute not-existing."),
    ("no-such-queue", lambda s, q: s.get_queue_attributes(
        QueueUrl=f"http://dmq.test/{ACCOUNT}/absent", AttributeNames=["All"]),
     "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
     "The specified queue does not exist."),
    ("no-such-queue-name", lambda s, q: s.get_queue_url(QueueName="absent"),
     "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", 400,
     "The specified queue does not exist."),
    ("max-messages-11", lambda s, q: s.receive_message(QueueUrl=q["std"], MaxNumberOfMessages=11),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, "
     "if provided."),
    ("wait-21", lambda s, q: s.receive_message(QueueUrl=q["std"], WaitTimeSeconds=21),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if "
     "provided."),
    ("oversized", lambda s, q: s.send_message(QueueUrl=q["small"], MessageBody="a" * 1025),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."),
    ("batch-too-long", lambda s, q: s.send_message_batch(QueueUrl=q["std"], Entries=[
        {"Id": "1", "MessageBody": "a" * 1_048_576}, {"Id": "2", "MessageBody": "a"}]),
     "AWS.SimpleQueueService.BatchRequestTooLong", "BatchRequestTooLong", 400,
     "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes."),
    ("batch-20", lambda s, q: s.delete_message_batch(QueueUrl=q["std"], Entries=[
        {"Id": str(i), "ReceiptHandle": "h"} for i in range(20)]),
     "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest", 400,
     "Maximum number of entries per request are 10. You have sent 20."),
    ("batch-bad-id", lambda s, q: s.send_message_batch(QueueUrl=q["std"], Entries=[
        {"Id": "invalid:id", "MessageBody": "x"}]),
     "AWS.SimpleQueueService.InvalidBatchEntryId", "InvalidBatchEntryId", 400,
     "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It "
     "can be at most 80 letters long."),
    ("fifo-delay", lambda s, q: s.send_message(
        QueueUrl=q["fifo"], MessageBody="x", DelaySeconds=2, MessageGroupId="g",
        MessageDeduplicationId="d"),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter "
     "that is not valid for this queue type."),
    ("fifo-no-group", lambda s, q: s.send_message(
        QueueUrl=q["fifo"], MessageBody="x", MessageDeduplicationId="d"),
     "MissingParameter", "MissingRequiredParameterException", 400,
     "The request must contain the parameter MessageGroupId."),
    ("fifo-no-dedup", lambda s, q: s.send_message(
        QueueUrl=q["fifo"], MessageBody="x", MessageGroupId="g"),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "The queue should either have ContentBasedDeduplication enabled or "
     "MessageDeduplicationId provided explicitly"),
    ("fifo-batch-no-group", lambda s, q: s.send_message_batch(
        QueueUrl=q["fifo"], Entries=[FIFO_ENTRY]),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "The request must contain the parameter MessageGroupId."),
    ("name-exists", lambda s, q: s.create_queue(
        QueueName="errors", Attributes={"DelaySeconds": "5"}),
     "QueueAlreadyExists", "QueueNameExists", 400,
     "A queue already exists with the same name and a different value for attribute "
     "DelaySeconds"),
    ("purge-again", lambda s, q: (s.purge_queue(QueueUrl=q["std"]),
                                  s.purge_queue(QueueUrl=q["std"])),
     "AWS.SimpleQueueService.PurgeQueueInProgress", "PurgeQueueInProgress", 403,
     "Only one PurgeQueue operation on errors is allowed every 60 seconds."),
    ("redrive-dummy-arn", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"RedrivePolicy": DUMMY_REDRIVE}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     f"Value {DUMMY_REDRIVE} for parameter RedrivePolicy is invalid. Reason: Invalid value "
     "for deadLetterTargetArn."),
    ("redrive-count-0", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"RedrivePolicy": ZERO_REDRIVE}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     f"Value {ZERO_REDRIVE} for parameter RedrivePolicy is invalid. Reason: Invalid value for "
     "maxReceiveCount: 0, valid values are from 1 to 1000 both inclusive."),
    ("redrive-no-count", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"RedrivePolicy": NO_COUNT_REDRIVE}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     f"Value {NO_COUNT_REDRIVE} for parameter RedrivePolicy is invalid. Reason: Redrive policy "
     "does not contain mandatory attribute: maxReceiveCount."),
    ("redrive-no-target", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"RedrivePolicy": NO_TARGET_REDRIVE}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     f"Value {NO_TARGET_REDRIVE} for parameter RedrivePolicy is invalid. Reason: Redrive "
     "policy does not contain mandatory attribute: deadLetterTargetArn."),
    ("visibility-43201", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"VisibilityTimeout": "43201"}),
     "InvalidAttributeValue", "InvalidAttributeValue", 400,
     "Invalid value for the parameter VisibilityTimeout."),
    ("retention-59", lambda s, q: s.create_queue(
        QueueName="short", Attributes={"MessageRetentionPeriod": "59"}),
     "InvalidAttributeValue", "InvalidAttributeValue", 400,
     "Invalid value for the parameter MessageRetentionPeriod."),
    ("fifo-attribute-on-standard", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"FifoQueue": "true"}),
     "InvalidAttributeName", "InvalidAttributeName", 400, "Unknown Attribute FifoQueue."),
    ("fifo-false-set-on-standard", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["std"], Attributes={"FifoQueue": "false"}),
     "InvalidAttributeName", "InvalidAttributeName", 400, "Unknown Attribute FifoQueue."),
    ("fifo-false-created-standard", lambda s, q: s.create_queue(
        QueueName="plain", Attributes={"FifoQueue": "false"}),
     "InvalidAttributeName", "InvalidAttributeName", 400, "Unknown Attribute FifoQueue."),
    ("dedup-created-standard", lambda s, q: s.create_queue(
        QueueName="plain", Attributes={"ContentBasedDeduplication": "false"}),
     "InvalidAttributeName", "InvalidAttributeName", 400,
     "Unknown Attribute ContentBasedDeduplication."),
    ("scope-created-standard", lambda s, q: s.create_queue(
        QueueName="plain", Attributes={"DeduplicationScope": "queue"}),
     "InvalidAttributeName", "InvalidAttributeName", 400,
     "You can specify the DeduplicationScope only when FifoQueue is set to true."),
    ("limit-created-standard", lambda s, q: s.create_queue(
        QueueName="plain", Attributes={"FifoThroughputLimit": "perQueue"}),
     "InvalidAttributeName", "InvalidAttributeName", 400,
     "You can specify the FifoThroughputLimit only when FifoQueue is set to true."),
    ("queue-type-change", lambda s, q: s.set_queue_attributes(
        QueueUrl=q["fifo"], Attributes={"FifoQueue": "false"}),
     "InvalidAttributeValue", "InvalidAttributeValue", 400,
     "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."),
    ("sse-both", lambda s, q: s.set_queue_attributes(QueueUrl=q["std"], Attributes={
        "KmsMasterKeyId": "alias/k", "SqsManagedSseEnabled": "true"}),
     "InvalidAttributeName", "InvalidAttributeName", 400,
     "You can use one type of server-side encryption (SSE) at one time. You can either enable "
     "KMS SSE or SQS SSE."),
    ("empty-attribute", lambda s, q: s.send_message(
        QueueUrl=q["std"], MessageBody="x",
        MessageAttributes={"ErrorDetails": {"DataType": "String", "StringValue": ""}}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."),
    ("invalid-body", lambda s, q: s.send_message(QueueUrl=q["std"], MessageBody="x\x1b"),
     "InvalidMessageContents", "InvalidMessageContents", 400,
     f"Invalid binary character '#x1B' was found in the message body, {ALLOWED}"),
    ("attribute-control-character", lambda s, q: s.send_message(
        QueueUrl=q["std"], MessageBody="x",
        MessageAttributes={"attr1": {"DataType": "String", "StringValue": "Invalid-\x08,\x0b"}}),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     f"Invalid binary character '#x8' was found in the message attribute 'attr1' value, "
     f"{ALLOWED}"),
    ("cancel-another-accounts-task", lambda s, q: s.cancel_message_move_task(
        TaskHandle=OTHER_ACCOUNT_HANDLE),
     "ResourceNotFoundException", "ResourceNotFoundException", 404,
     "The resource that you specified for the SourceArn parameter doesn't exist."),
    ("receipt-handle", lambda s, q: s.delete_message(QueueUrl=q["std"], ReceiptHandle="bad"),
     "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 400,
     'The input receipt handle "bad" is not a valid receipt handle.'),
    ("label-exists", lambda s, q: (s.add_permission(QueueUrl=q["std"], **PERMISSION),
                                   s.add_permission(QueueUrl=q["std"], **PERMISSION)),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists."),
    ("label-unknown", lambda s, q: s.remove_permission(QueueUrl=q["std"], Label="absent"),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Value absent for parameter Label is invalid. Reason: can't find label."),
    ("queue-name", lambda s, q: s.create_queue(QueueName="bad name"),
     "InvalidParameterValue", "InvalidParameterValueException", 400,
     "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"),
]


@pytest.fixture
def queues(sqs: Any) -> dict[str, str]:
    """A standard queue, a FIFO queue and one taking messages of at most 1 KiB."""
    return {
        "std": sqs.create_queue(QueueName="errors")["QueueUrl"],
        "fifo": sqs.create_queue(QueueName="errors.fifo",
                                 Attributes={"FifoQueue": "true"})["QueueUrl"],
        "small": sqs.create_queue(QueueName="small",
                                  Attributes={"MaximumMessageSize": "1024"})["QueueUrl"],
    }


@pytest.mark.parametrize(("call", "code", "json_type", "status", "message"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_each_refusal_has_aws_code_status_and_message(
    sqs: Any, queues: dict[str, str], call: Call, code: str, json_type: str, status: int,
    message: str,
) -> None:
    # WHEN a request SQS refuses is made over JSON
    with pytest.raises(ClientError) as caught:
        call(sqs, queues)
    # THEN the answer is SQS's, field for field
    response = caught.value.response
    assert (response["Error"]["Code"], response["Error"]["QueryErrorCode"],
            response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Message"]) == (
        code, json_type, status, message)


# -- attribute names with surrounding whitespace ---------------------------------------------


def test_whitespace_around_attribute_names_is_ignored_over_json(sqs: Any) -> None:
    # GIVEN a queue created with attribute names padded with whitespace
    url = sqs.create_queue(QueueName="padded", Attributes={
        " DelaySeconds": "1", "VisibilityTimeout ": "40"})["QueueUrl"]
    # WHEN the attributes are read by padded names
    found = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=[" VisibilityTimeout ", "\tDelaySeconds"])["Attributes"]
    # THEN the names are read as the names they pad
    assert found == {"VisibilityTimeout": "40", "DelaySeconds": "1"}
    # AND the same create again is idempotent; a padded set applies
    assert sqs.create_queue(QueueName="padded", Attributes={
        "DelaySeconds": "1", " VisibilityTimeout": "40"})["QueueUrl"] == url
    sqs.set_queue_attributes(QueueUrl=url, Attributes={" DelaySeconds ": "0"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])[
        "Attributes"] == {"DelaySeconds": "0"}
    # AND a padded system attribute name selects that attribute of a received message
    sqs.send_message(QueueUrl=url, MessageBody="m")
    received = sqs.receive_message(QueueUrl=url, AttributeNames=[" SentTimestamp "])
    assert set(received["Messages"][0]["Attributes"]) == {"SentTimestamp"}


def test_a_padded_fifo_queue_attribute_makes_a_fifo_queue(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="padded.fifo", Attributes={" FifoQueue": "true"})[
        "QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])[
        "Attributes"] == {"FifoQueue": "true"}


def test_a_padded_unknown_name_is_still_unknown(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="padded")["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[" Colour "])
    assert caught.value.response["Error"]["Message"] == "Unknown Attribute Colour."


# -- the same refusals over the Query protocol ---------------------------------------------

QUEUE_URL = f"http://dmq.test/{ACCOUNT}/q"
QUERY_CASES: list[tuple[str, dict[str, str], int, str, str]] = [
    ("tag-none", {"Action": "TagQueue", "QueueUrl": QUEUE_URL}, 400, "MissingParameter",
     "The request must contain the parameter Tags."),
    ("tag-51", {"Action": "TagQueue", "QueueUrl": QUEUE_URL, **{
        k: v for i in range(51) for k, v in ((f"Tag.{i + 1}.Key", f"k{i}"),
                                             (f"Tag.{i + 1}.Value", "v"))}},
     400, "InvalidParameterValue", "Too many tags added for queue q."),
    ("redrive-dummy-arn", {"Action": "SetQueueAttributes", "QueueUrl": QUEUE_URL,
                           "Attribute.1.Name": "RedrivePolicy",
                           "Attribute.1.Value": DUMMY_REDRIVE},
     400, "InvalidParameterValue", f"Value {DUMMY_REDRIVE} for parameter RedrivePolicy is "
     "invalid. Reason: Invalid value for deadLetterTargetArn."),
    ("visibility-43201", {"Action": "SetQueueAttributes", "QueueUrl": QUEUE_URL,
                          "Attribute.1.Name": "VisibilityTimeout",
                          "Attribute.1.Value": "43201"},
     400, "InvalidAttributeValue", "Invalid value for the parameter VisibilityTimeout."),
    ("invalid-body", {"Action": "SendMessage", "QueueUrl": QUEUE_URL, "MessageBody": "\x01"},
     400, "InvalidMessageContents",
     f"Invalid binary character '#x1' was found in the message body, {ALLOWED}"),
    ("unknown-attribute", {"Action": "GetQueueAttributes", "QueueUrl": QUEUE_URL,
                           "AttributeName.1": "Colour"},
     400, "InvalidAttributeName", "Unknown Attribute Colour."),
    ("fifo-set-on-standard", {"Action": "SetQueueAttributes", "QueueUrl": QUEUE_URL,
                              "Attribute.1.Name": "FifoQueue", "Attribute.1.Value": "false"},
     400, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
    ("fifo-false-created-standard", {"Action": "CreateQueue", "QueueName": "plain",
                                     "Attribute.1.Name": "FifoQueue",
                                     "Attribute.1.Value": "false"},
     400, "InvalidAttributeName", "Unknown Attribute FifoQueue."),
    ("dedup-created-standard", {"Action": "CreateQueue", "QueueName": "plain",
                                "Attribute.1.Name": "ContentBasedDeduplication",
                                "Attribute.1.Value": "false"},
     400, "InvalidAttributeName", "Unknown Attribute ContentBasedDeduplication."),
    ("attribute-control-character", {
        "Action": "SendMessage", "QueueUrl": QUEUE_URL, "MessageBody": "x",
        "MessageAttribute.1.Name": "attr1", "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "Invalid-\x08,\x0b"},
     400, "InvalidParameterValue",
     f"Invalid binary character '#x8' was found in the message attribute 'attr1' value, "
     f"{ALLOWED}"),
    ("cancel-another-accounts-task", {"Action": "CancelMessageMoveTask",
                                      "TaskHandle": OTHER_ACCOUNT_HANDLE},
     404, "ResourceNotFoundException",
     "The resource that you specified for the SourceArn parameter doesn't exist."),
    ("batch-20", {"Action": "DeleteMessageBatch", "QueueUrl": QUEUE_URL, **{
        k: v for i in range(20) for k, v in ((f"DeleteMessageBatchRequestEntry.{i + 1}.Id",
                                              str(i)),
                                             (f"DeleteMessageBatchRequestEntry.{i + 1}"
                                              ".ReceiptHandle", "h"))}},
     400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
     "Maximum number of entries per request are 10. You have sent 20."),
]


@pytest.mark.parametrize(("params", "status", "code", "message"),
                         [case[1:] for case in QUERY_CASES], ids=[c[0] for c in QUERY_CASES])
def test_each_refusal_is_the_same_over_query(
    dmq: Client, params: dict[str, str], status: int, code: str, message: str,
) -> None:
    # GIVEN a queue WHEN a request SQS refuses is made over Query
    create(dmq, "q")
    result = dmq.http.post("/", headers=FORM, body=urlencode({"Version": "2012-11-05",
                                                              **params}))
    # THEN the XML error holds SQS's legacy code, its message, and SQS's status
    assert result.status_code == status
    assert error_of(ET.fromstring(result.body)) == ("Sender", code, message)


def test_a_purge_too_soon_is_403_over_query(dmq: Client) -> None:
    create(dmq, "q")
    body = urlencode({"Version": "2012-11-05", "Action": "PurgeQueue", "QueueUrl": QUEUE_URL})
    assert dmq.http.post("/", headers=FORM, body=body).status_code == 200
    again = dmq.http.post("/", headers=FORM, body=body)
    assert again.status_code == 403
    assert error_of(ET.fromstring(again.body)) == (
        "Sender", "AWS.SimpleQueueService.PurgeQueueInProgress",
        "Only one PurgeQueue operation on q is allowed every 60 seconds.")


def test_padded_attribute_names_are_ignored_over_query(dmq: Client) -> None:
    # GIVEN a queue created over Query with a padded attribute name
    create(dmq, "q", **{"Attribute.1.Name": " DelaySeconds ", "Attribute.1.Value": "3"})
    # WHEN it is read by a padded name THEN the attribute it pads is answered
    body = urlencode({"Version": "2012-11-05", "Action": "GetQueueAttributes",
                      "QueueUrl": QUEUE_URL, "AttributeName.1": " DelaySeconds"})
    root = ET.fromstring(dmq.http.post("/", headers=FORM, body=body).body)
    attributes = {a.findtext(f"{NS}Name"): a.findtext(f"{NS}Value")
                  for a in root.iter(f"{NS}Attribute")}
    assert attributes == {"DelaySeconds": "3"}
