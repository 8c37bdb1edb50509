"""FIFO queues: creation, the FIFO attributes and their rules, as SQS documents them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

FIFO_NAME_ERROR = (
    "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
    "underscores, must end with .fifo suffix and be 1 to 80 in length."
)
STANDARD_NAME_ERROR = (
    "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
)


def _error(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def _fifo(sqs: Any, name: str = "orders.fifo", **attributes: str) -> str:
    url: str = sqs.create_queue(QueueName=name,
                                Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]
    return url


def _attrs(sqs: Any, url: str, *names: str) -> dict[str, str]:
    result: dict[str, str] = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=list(names))["Attributes"]
    return result


def test_fifo_queue_has_the_documented_defaults(sqs: Any) -> None:
    # GIVEN a FIFO queue created with FifoQueue=true and a .fifo name
    url = _fifo(sqs)
    # THEN its URL ends in the name and the FIFO attributes hold SQS's defaults
    assert url.endswith("/orders.fifo")
    attributes = _attrs(sqs, url, "All")
    assert attributes["FifoQueue"] == "true"
    assert attributes["ContentBasedDeduplication"] == "false"
    assert attributes["DeduplicationScope"] == "queue"
    assert attributes["FifoThroughputLimit"] == "perQueue"
    assert attributes["VisibilityTimeout"] == "30"
    assert sqs.get_queue_url(QueueName="orders.fifo")["QueueUrl"] == url


def test_fifo_name_needs_fifo_queue_true(sqs: Any) -> None:
    # GIVEN a .fifo name WHEN it is created without FifoQueue=true THEN SQS's name error
    for attributes in ({}, {"FifoQueue": "false"}):
        with pytest.raises(ClientError) as caught:
            sqs.create_queue(QueueName="orders.fifo", Attributes=attributes)
        assert _error(caught) == ("InvalidParameterValue", STANDARD_NAME_ERROR)
    assert "QueueUrls" not in sqs.list_queues()


def test_fifo_queue_true_needs_a_fifo_name(sqs: Any) -> None:
    # GIVEN FifoQueue=true WHEN the name lacks .fifo THEN the FIFO name error
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName="orders", Attributes={"FifoQueue": "true"})
    assert _error(caught) == ("InvalidParameterValue", FIFO_NAME_ERROR)


@pytest.mark.parametrize("name", ["a" * 76 + ".fifo", "bad name.fifo", ".fifo"])
def test_fifo_name_rules(sqs: Any, name: str) -> None:
    # GIVEN a FIFO name too long (the suffix counts) or with a bad character, or empty
    with pytest.raises(ClientError) as caught:
        _fifo(sqs, name)
    assert _error(caught) == ("InvalidParameterValue", STANDARD_NAME_ERROR)


def test_longest_fifo_name_is_80_characters(sqs: Any) -> None:
    url = _fifo(sqs, "a" * 75 + ".fifo")
    assert url.endswith("a" * 75 + ".fifo")


@pytest.mark.parametrize(("name", "message"), [
    ("ContentBasedDeduplication", "Unknown Attribute ContentBasedDeduplication."),
    ("DeduplicationScope",
     "You can specify the DeduplicationScope only when FifoQueue is set to true."),
    ("FifoThroughputLimit",
     "You can specify the FifoThroughputLimit only when FifoQueue is set to true."),
])
def test_standard_queue_refuses_fifo_attributes(sqs: Any, name: str, message: str) -> None:
    value = {"ContentBasedDeduplication": "true", "DeduplicationScope": "queue",
             "FifoThroughputLimit": "perQueue"}[name]
    # WHEN a standard queue is created, or changed, with a FIFO-only attribute
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName="plain", Attributes={name: value})
    assert _error(caught) == ("InvalidAttributeName", message)
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
    assert _error(caught) == ("InvalidAttributeName", message)
    # AND a standard queue shows none of them
    assert "FifoQueue" not in _attrs(sqs, url, "All")


def test_standard_queue_cannot_become_fifo(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    assert _error(caught) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")


def test_fifo_queue_type_cannot_change(sqs: Any) -> None:
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert _error(caught) == (
        "InvalidAttributeValue",
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not "
        "supported.")
    # FifoQueue=true again changes nothing
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    assert _attrs(sqs, url, "FifoQueue") == {"FifoQueue": "true"}


def test_fifo_attributes_are_set_and_read(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true", DeduplicationScope="messageGroup",
                FifoThroughputLimit="perMessageGroupId")
    assert _attrs(sqs, url, "ContentBasedDeduplication", "DeduplicationScope",
                  "FifoThroughputLimit") == {
        "ContentBasedDeduplication": "true", "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "ContentBasedDeduplication": "false", "FifoThroughputLimit": "perQueue",
        "DeduplicationScope": "queue"})
    assert _attrs(sqs, url, "ContentBasedDeduplication", "DeduplicationScope",
                  "FifoThroughputLimit") == {
        "ContentBasedDeduplication": "false", "DeduplicationScope": "queue",
        "FifoThroughputLimit": "perQueue"}


@pytest.mark.parametrize(("name", "value"), [
    ("ContentBasedDeduplication", "yes"), ("DeduplicationScope", "group"),
    ("FifoThroughputLimit", "perGroup"),
])
def test_fifo_attribute_values_are_checked(sqs: Any, name: str, value: str) -> None:
    with pytest.raises(ClientError) as caught:
        _fifo(sqs, **{name: value})
    code, message = _error(caught)
    assert code == "InvalidAttributeValue"
    assert message.startswith(f"Invalid value for the parameter {name}.")


def test_per_message_group_throughput_needs_message_group_scope(sqs: Any) -> None:
    # GIVEN perMessageGroupId with the default (queue) scope THEN refused at creation
    with pytest.raises(ClientError) as caught:
        _fifo(sqs, FifoThroughputLimit="perMessageGroupId")
    assert _error(caught)[0] == "InvalidAttributeValue"
    # AND on a queue with queue scope
    url = _fifo(sqs)
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url,
                                 Attributes={"FifoThroughputLimit": "perMessageGroupId"})
    assert _error(caught)[0] == "InvalidAttributeValue"
    assert _attrs(sqs, url, "FifoThroughputLimit") == {"FifoThroughputLimit": "perQueue"}
    # AND the scope cannot go back to queue under high throughput
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
    with pytest.raises(ClientError):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "queue"})


def test_high_throughput_queue_is_sharded_and_can_be_resharded(sqs: Any) -> None:
    url = _fifo(sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    assert _attrs(sqs, url, "DmqShardCount") == {"DmqShardCount": "4"}
    # Its hash ranges split (tests/functional/test_fifo_resharding.py keeps the order)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "8"})
    assert _attrs(sqs, url, "DmqShardCount") == {"DmqShardCount": "8"}
    # Switching the throughput mode leaves the shards (and so every group's shard) as they are
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perQueue"})
    assert _attrs(sqs, url, "DmqShardCount") == {"DmqShardCount": "8"}
    # A count out of range is refused
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"DmqShardCount": "65"})
    assert _error(caught)[0] == "InvalidAttributeValue"


def test_create_fifo_again_is_idempotent(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    assert _fifo(sqs, ContentBasedDeduplication="true") == url
    with pytest.raises(sqs.exceptions.QueueNameExists):
        _fifo(sqs, ContentBasedDeduplication="false")


def test_fifo_dead_letter_queue_must_be_fifo(sqs: Any) -> None:
    fifo_dlq = _fifo(sqs, "dlq.fifo")
    standard_dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]

    def arn(url: str) -> str:
        return _attrs(sqs, url, "QueueArn")["QueueArn"]

    def policy(target: str) -> str:
        return json.dumps({"deadLetterTargetArn": arn(target), "maxReceiveCount": 3})

    reason = "Reason: Dead-letter queue must be same type of queue as the source.."
    # A FIFO source with a standard DLQ, and a standard source with a FIFO DLQ, are refused
    with pytest.raises(ClientError) as caught:
        _fifo(sqs, "source.fifo", RedrivePolicy=policy(standard_dlq))
    code, message = _error(caught)
    assert code == "InvalidParameterValue" and message.endswith(reason)
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName="source", Attributes={"RedrivePolicy": policy(fifo_dlq)})
    assert _error(caught)[1].endswith(reason)
    # FIFO to FIFO and standard to standard are accepted
    source = _fifo(sqs, "source.fifo", RedrivePolicy=policy(fifo_dlq))
    assert arn(fifo_dlq) in _attrs(sqs, source, "RedrivePolicy")["RedrivePolicy"]
    plain = sqs.create_queue(QueueName="source",
                             Attributes={"RedrivePolicy": policy(standard_dlq)})["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.set_queue_attributes(QueueUrl=plain, Attributes={"RedrivePolicy": policy(fifo_dlq)})
    assert _error(caught)[1].endswith(reason)
