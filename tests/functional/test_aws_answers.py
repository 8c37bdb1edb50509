"""GIVEN requests SQS accepts WHEN DMQ answers them, over JSON (boto3) and over Query (form
posts) THEN the answer holds what SQS's holds, as AWS-validated snapshot tests record it
(LocalStack's tests/aws/services/sqs): message attribute names of any script, the KMS
attributes after SSE is reset, batch results without empty lists, and the attributes a
receive's name filters select."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError
from chalice.test import Client

from tests.functional.test_query_protocol import FORM, NS, create


def _post(dmq: Client, **params: str) -> tuple[int, Any]:
    body = urlencode({"Version": "2012-11-05", **params})
    result = dmq.http.post("/", headers=FORM, body=body)
    return result.status_code, ET.fromstring(result.body)


def _indexed(prefix: str, values: list[str]) -> dict[str, str]:
    return {f"{prefix}.{i + 1}": value for i, value in enumerate(values)}


# -- message attribute names of any script -------------------------------------------------
UNICODE_NAME = "attr.1\u00f8\u00df\u00e4"  # attr.1øßä, which SQS accepts


def test_a_unicode_attribute_name_is_accepted_over_json(sqs: Any) -> None:
    # GIVEN a queue WHEN a message is sent with an attribute named in non-ASCII letters
    url = sqs.create_queue(QueueName="names")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes={
        UNICODE_NAME: {"DataType": "String", "StringValue": "Valida"}})
    # THEN it is stored and received with the digest the send returned
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert message["MessageAttributes"] == {
        UNICODE_NAME: {"DataType": "String", "StringValue": "Valida"}}
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


@pytest.mark.parametrize("name", ["Invalid-\u00a7-attr", "Invalid-!-attr", "sp ace"])
def test_a_name_with_other_characters_is_still_refused(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName="names")["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="test", MessageAttributes={
            name: {"DataType": "String", "StringValue": "v"}})
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_a_unicode_attribute_name_is_accepted_over_query(dmq: Client) -> None:
    url = create(dmq, "names")
    status, root = _post(dmq, Action="SendMessage", QueueUrl=url, MessageBody="test", **{
        "MessageAttribute.1.Name": UNICODE_NAME,
        "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "Valida"})
    assert status == 200, ET.tostring(root)
    status, root = _post(dmq, Action="ReceiveMessage", QueueUrl=url,
                         **{"MessageAttributeName.1": "All"})
    names = [a.findtext(f"{NS}Name") for a in root.iter(f"{NS}MessageAttribute")]
    assert names == [UNICODE_NAME]


# -- the KMS attributes after SSE is reset to its defaults ---------------------------------
KMS = {"KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000"}
RESET = {"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"}
SSE_NAMES = ["KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled"]


def test_a_reset_kms_key_leaves_no_kms_attributes_over_json(sqs: Any) -> None:
    # GIVEN a queue encrypted with a KMS key
    url = sqs.create_queue(QueueName="sse")["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes=KMS)
    everything = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: everything[k] for k in SSE_NAMES} == {**KMS, "SqsManagedSseEnabled": "false"}
    # WHEN the key is cleared and the reuse period set back to its default
    sqs.set_queue_attributes(QueueUrl=url, Attributes=RESET)
    # THEN, as in SQS, neither KMS attribute is shown, by All or by name
    everything = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: everything.get(k) for k in SSE_NAMES} == {
        "KmsMasterKeyId": None, "KmsDataKeyReusePeriodSeconds": None,
        "SqsManagedSseEnabled": "false"}
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=SSE_NAMES)[
        "Attributes"] == {"SqsManagedSseEnabled": "false"}


def test_sse_sqs_shows_no_kms_attributes_over_json(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="sse")["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "true"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=SSE_NAMES)[
        "Attributes"] == {"SqsManagedSseEnabled": "true"}


def _query_attributes(dmq: Client, url: str, names: list[str]) -> dict[str, str]:
    _, root = _post(dmq, Action="GetQueueAttributes", QueueUrl=url,
                    **_indexed("AttributeName", names))
    return {a.findtext(f"{NS}Name"): a.findtext(f"{NS}Value")
            for a in root.iter(f"{NS}Attribute")}


def _query_set(dmq: Client, url: str, attributes: dict[str, str]) -> None:
    form: dict[str, str] = {}
    for i, (name, value) in enumerate(attributes.items()):
        form[f"Attribute.{i + 1}.Name"] = name
        form[f"Attribute.{i + 1}.Value"] = value
    status, root = _post(dmq, Action="SetQueueAttributes", QueueUrl=url, **form)
    assert status == 200, ET.tostring(root)


def test_a_reset_kms_key_leaves_no_kms_attributes_over_query(dmq: Client) -> None:
    url = create(dmq, "sse")
    _query_set(dmq, url, KMS)
    assert _query_attributes(dmq, url, SSE_NAMES) == {**KMS, "SqsManagedSseEnabled": "false"}
    _query_set(dmq, url, RESET)
    assert _query_attributes(dmq, url, SSE_NAMES) == {"SqsManagedSseEnabled": "false"}
    assert "KmsDataKeyReusePeriodSeconds" not in _query_attributes(dmq, url, ["All"])


# -- batch results without empty lists ------------------------------------------------------
def test_a_batch_without_failures_has_no_failed_list_over_json(sqs: Any) -> None:
    # GIVEN a queue WHEN every entry of each batch succeeds THEN no "Failed" member, as in
    # SQS's JSON answers
    url = sqs.create_queue(QueueName="batches", Attributes={"VisibilityTimeout": "0"})[
        "QueueUrl"]
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "1", "MessageBody": "a"}, {"Id": "2", "MessageBody": "b"}])
    assert "Failed" not in sent and len(sent["Successful"]) == 2
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
               for i, m in enumerate(received["Messages"])]
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {**h, "VisibilityTimeout": 60} for h in handles])
    assert "Failed" not in changed and len(changed["Successful"]) == len(handles)
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=handles)
    assert "Failed" not in deleted and len(deleted["Successful"]) == len(handles)


def test_a_batch_where_every_entry_fails_has_no_successful_list_over_json(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="batches")["QueueUrl"]
    bad = [{"Id": "1", "ReceiptHandle": "garbage"}]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=bad)
    assert "Successful" not in deleted
    assert [e["Code"] for e in deleted["Failed"]] == ["ReceiptHandleIsInvalid"]
    changed = sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{**bad[0], "VisibilityTimeout": 5}])
    assert "Successful" not in changed and len(changed["Failed"]) == 1
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "\x00"}])
    assert "Successful" not in sent and len(sent["Failed"]) == 1


def test_a_batch_over_json_leaves_empty_lists_out_of_the_body(dmq: Client, sqs: Any) -> None:
    # The wire itself, not boto3's reading of it: no "Failed": [] in the JSON body
    url = sqs.create_queue(QueueName="batches")["QueueUrl"]
    result = dmq.http.post("/", headers={
        "Content-Type": "application/x-amz-json-1.0", "Host": "dmq.test",
        "X-Amz-Target": "AmazonSQS.SendMessageBatch"},
        body=f'{{"QueueUrl": "{url}", "Entries": [{{"Id": "1", "MessageBody": "a"}}]}}')
    assert result.status_code == 200
    assert b'"Failed"' not in result.body and b'"Successful"' in result.body


def test_a_batch_over_query_holds_only_its_entries(dmq: Client) -> None:
    url = create(dmq, "batches")
    status, root = _post(dmq, Action="SendMessageBatch", QueueUrl=url, **{
        "SendMessageBatchRequestEntry.1.Id": "1",
        "SendMessageBatchRequestEntry.1.MessageBody": "a"})
    assert status == 200
    result = root.find(f"{NS}SendMessageBatchResult")
    assert [child.tag for child in result] == [f"{NS}SendMessageBatchResultEntry"]
    status, root = _post(dmq, Action="DeleteMessageBatch", QueueUrl=url, **{
        "DeleteMessageBatchRequestEntry.1.Id": "1",
        "DeleteMessageBatchRequestEntry.1.ReceiptHandle": "garbage"})
    assert status == 200
    result = root.find(f"{NS}DeleteMessageBatchResult")
    assert [child.tag for child in result] == [f"{NS}BatchResultErrorEntry"]


# -- the attributes a receive's name filters select ------------------------------------------
ATTRIBUTES = {
    "Help.Me": {"DataType": "String", "StringValue": "Me"},
    "Hello": {"DataType": "String", "StringValue": "There"},
    "General": {"DataType": "String", "StringValue": "Kenobi"},
}
# (filter, the attribute names SQS returns), as its snapshot records them
FILTERS = [
    ([], []),
    (["All"], ["General", "Hello", "Help.Me"]),
    (["*"], ["General", "Hello", "Help.Me"]),
    ([".*"], ["General", "Hello", "Help.Me"]),
    (["Foo", "Help"], []),
    (["Hello", "General"], ["General", "Hello"]),
    (["Foo", "Hello"], ["Hello"]),
    (["Hel.*"], ["Hello", "Help.Me"]),
    (["AWS."], []),
    (["..foo"], []),
]


@pytest.fixture
def filtered_queue(sqs: Any) -> str:
    """A queue whose one message (visible again at once) has three attributes."""
    url = sqs.create_queue(QueueName="filters", Attributes={"VisibilityTimeout": "0"})[
        "QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes=ATTRIBUTES)
    return str(url)


@pytest.mark.parametrize(("names", "expected"), FILTERS, ids=[str(f[0]) for f in FILTERS])
def test_message_attribute_filters_over_json(
    sqs: Any, filtered_queue: str, names: list[str], expected: list[str],
) -> None:
    message = sqs.receive_message(QueueUrl=filtered_queue, MessageAttributeNames=names)[
        "Messages"][0]
    assert sorted(message.get("MessageAttributes", {})) == expected
    assert ("MD5OfMessageAttributes" in message) == bool(expected)


@pytest.mark.parametrize(("names", "expected"), FILTERS, ids=[str(f[0]) for f in FILTERS])
def test_message_attribute_filters_over_query(
    dmq: Client, filtered_queue: str, names: list[str], expected: list[str],
) -> None:
    status, root = _post(dmq, Action="ReceiveMessage", QueueUrl=filtered_queue,
                         **_indexed("MessageAttributeName", names))
    assert status == 200
    found = [a.findtext(f"{NS}Name") for a in root.iter(f"{NS}MessageAttribute")]
    assert sorted(found) == expected


SYSTEM = ["ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId",
          "SentTimestamp"]


@pytest.mark.parametrize("parameter", ["AttributeNames", "MessageSystemAttributeNames"])
def test_system_attribute_filters_over_json(
    sqs: Any, filtered_queue: str, parameter: str,
) -> None:
    def names(asked: list[str]) -> list[str]:
        message = sqs.receive_message(QueueUrl=filtered_queue, **{parameter: asked})[
            "Messages"][0]
        return sorted(message.get("Attributes", {}))

    assert names(["All"]) == SYSTEM
    assert names(["SenderId"]) == ["SenderId"]
    assert names(["SenderId", "SequenceNumber"]) == ["SenderId"]


@pytest.mark.parametrize("parameter", ["AttributeName", "MessageSystemAttributeNames"])
def test_system_attribute_filters_over_query(
    dmq: Client, filtered_queue: str, parameter: str,
) -> None:
    def names(asked: list[str]) -> list[str]:
        _, root = _post(dmq, Action="ReceiveMessage", QueueUrl=filtered_queue,
                        **_indexed(parameter, asked))
        return sorted(a.findtext(f"{NS}Name") for a in root.iter(f"{NS}Attribute"))

    assert names(["All"]) == SYSTEM
    assert names(["SenderId"]) == ["SenderId"]


def test_all_system_attributes_with_all_message_attributes(sqs: Any, filtered_queue: str) -> None:
    message = sqs.receive_message(QueueUrl=filtered_queue, AttributeNames=["All"],
                                  MessageAttributeNames=["All"])["Messages"][0]
    assert sorted(message["Attributes"]) == SYSTEM
    assert sorted(message["MessageAttributes"]) == ["General", "Hello", "Help.Me"]


def test_a_fifo_receive_filters_attributes_alike(sqs: Any) -> None:
    # GIVEN a FIFO queue's message WHEN received with a wildcard and a prefix THEN the same
    # selection as a standard queue's, and All names the FIFO system attributes too
    url = sqs.create_queue(QueueName="filters.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes=ATTRIBUTES,
                     MessageGroupId="g", MessageDeduplicationId="d")
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["*"],
                                  MessageSystemAttributeNames=["All"])["Messages"][0]
    assert sorted(message["MessageAttributes"]) == ["General", "Hello", "Help.Me"]
    assert sorted(message["Attributes"]) == sorted(
        [*SYSTEM, "MessageDeduplicationId", "MessageGroupId", "SequenceNumber"])
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["Hel.*"])[
        "Messages"][0]
    assert sorted(message["MessageAttributes"]) == ["Hello", "Help.Me"]
