"""GIVEN messages WHEN they are received with MessageSystemAttributeNames or AttributeNames
THEN the system attributes are SQS's: AWSTraceHeader from the system attribute or the
X-Amzn-Trace-Id header, and DeadLetterQueueSourceArn on messages moved to a DLQ."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.clocks import FakeClock
from tests.functional.test_message_attributes import expected_md5

ACCOUNT = "000000000000"
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
OTHER = "Root=1-67891233-abcdef012345678912345678;Sampled=0"


def _queue(sqs: Any, name: str = "details", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                **kwargs)
    return list(found.get("Messages", []))


def _with_trace_header(sqs: Any, value: str) -> None:
    """Every request of this client carries `X-Amzn-Trace-Id: value` (as an X-Ray SDK or a
    Lambda function's SDK sends it)."""
    def add(request: Any, **kwargs: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = value

    sqs.meta.events.register("before-sign.sqs", add)


# -- MessageSystemAttributeNames ------------------------------------------------------------
@pytest.mark.parametrize("parameter", ["MessageSystemAttributeNames", "AttributeNames"])
def test_either_parameter_selects_system_attributes(sqs: Any, parameter: str) -> None:
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = _receive(sqs, url, **{parameter: ["SenderId", "ApproximateReceiveCount"]})
    assert message["Attributes"] == {"SenderId": ACCOUNT, "ApproximateReceiveCount": "1"}


def test_message_system_attribute_names_decides_when_both_are_given(sqs: Any) -> None:
    # GIVEN a message WHEN both parameters name different attributes
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = _receive(sqs, url, AttributeNames=["All"],
                          MessageSystemAttributeNames=["SentTimestamp"])
    # THEN the newer parameter decides
    assert set(message["Attributes"]) == {"SentTimestamp"}
    # AND an empty newer list leaves the older one in force
    (message,) = _receive(sqs, url, AttributeNames=["SenderId"], MessageSystemAttributeNames=[])
    assert set(message["Attributes"]) == {"SenderId"}


def test_all_returns_every_attribute_a_standard_message_has(sqs: Any, clock: FakeClock) -> None:
    url = _queue(sqs)
    sent_at = clock.now_ms()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    # THEN the four attributes of a standard message, and none of the FIFO ones
    assert message["Attributes"] == {
        "SenderId": ACCOUNT, "SentTimestamp": str(sent_at), "ApproximateReceiveCount": "1",
        "ApproximateFirstReceiveTimestamp": str(sent_at),
    }


@pytest.mark.parametrize("name", ["SequenceNumber", "MessageDeduplicationId", "MessageGroupId",
                                  "DeadLetterQueueSourceArn", "AWSTraceHeader", "Unknown"])
def test_an_attribute_the_message_lacks_is_left_out(sqs: Any, name: str) -> None:
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=[name])
    assert "Attributes" not in message


# -- AWSTraceHeader --------------------------------------------------------------------------
def test_the_trace_header_of_the_request_becomes_aws_trace_header(sqs: Any) -> None:
    # GIVEN a client whose requests carry X-Amzn-Trace-Id
    url = _queue(sqs)
    _with_trace_header(sqs, TRACE)
    # WHEN it sends a message without system attributes
    sent = sqs.send_message(QueueUrl=url, MessageBody="traced")
    # THEN no system attribute digest is returned (the client sent none)
    assert "MD5OfMessageSystemAttributes" not in sent
    # AND the message carries the header as its AWSTraceHeader
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert message["Attributes"] == {"AWSTraceHeader": TRACE}


def test_the_system_attribute_overrides_the_trace_header(sqs: Any) -> None:
    # GIVEN a request with both the header and the AWSTraceHeader system attribute
    url = _queue(sqs)
    _with_trace_header(sqs, OTHER)
    own = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="x", MessageSystemAttributes=own)
    # THEN the system attribute wins, and its digest is the one returned
    assert sent["MD5OfMessageSystemAttributes"] == expected_md5(own)
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    assert message["Attributes"]["AWSTraceHeader"] == TRACE


def test_the_trace_header_applies_to_every_entry_of_a_batch(sqs: Any) -> None:
    # GIVEN a batch sent with the header, one entry carrying its own AWSTraceHeader
    url = _queue(sqs)
    _with_trace_header(sqs, OTHER)
    own = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "a"},
        {"Id": "b", "MessageBody": "b"},
        {"Id": "c", "MessageBody": "c", "MessageSystemAttributes": own},
    ])
    assert sorted(e["Id"] for e in result["Successful"]) == ["a", "b", "c"]
    # THEN every entry without its own carries the header, the other keeps its own
    traces = {m["Body"]: m["Attributes"]["AWSTraceHeader"]
              for m in _receive(sqs, url, AttributeNames=["AWSTraceHeader"])}
    assert traces == {"a": OTHER, "b": OTHER, "c": TRACE}


def test_without_the_header_or_the_attribute_there_is_no_trace(sqs: Any) -> None:
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    assert "AWSTraceHeader" not in message["Attributes"]


# -- DeadLetterQueueSourceArn ----------------------------------------------------------------
def _redriven(sqs: Any) -> tuple[str, str, str]:
    dlq = _queue(sqs, "dead")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    source = _queue(sqs, "work", RedrivePolicy=policy, VisibilityTimeout="5")
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    return source, dlq, source_arn


def test_a_message_moved_by_max_receive_count_names_its_source_queue(
    sqs: Any, clock: FakeClock,
) -> None:
    # GIVEN a message received once from a queue with maxReceiveCount=1
    source, dlq, source_arn = _redriven(sqs)
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    (first,) = sqs.receive_message(QueueUrl=source, MessageSystemAttributeNames=["All"])[
        "Messages"]
    # THEN while in the source queue it has no DeadLetterQueueSourceArn
    assert "DeadLetterQueueSourceArn" not in first["Attributes"]
    # WHEN its visibility times out and the next receive moves it to the DLQ
    clock.advance(5)
    assert "Messages" not in sqs.receive_message(QueueUrl=source)
    # THEN received from the DLQ it names the source queue, by name and under All
    (moved,) = _receive(sqs, dlq, MessageSystemAttributeNames=["DeadLetterQueueSourceArn"])
    assert moved["Attributes"] == {"DeadLetterQueueSourceArn": source_arn}
    (moved,) = _receive(sqs, dlq, AttributeNames=["All"])
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    assert moved["Body"] == "poison"


def test_the_source_arn_is_only_returned_when_asked_for(sqs: Any, clock: FakeClock) -> None:
    source, dlq, _ = _redriven(sqs)
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    sqs.receive_message(QueueUrl=source)
    clock.advance(5)
    sqs.receive_message(QueueUrl=source)
    (moved,) = _receive(sqs, dlq, MessageSystemAttributeNames=["SenderId"])
    assert moved["Attributes"] == {"SenderId": ACCOUNT}
