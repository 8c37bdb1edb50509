"""GIVEN a queue WHEN it is read THEN long polling, batch sizes and system attributes follow SQS."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.clocks import FakeClock

ACCOUNT = "000000000000"


def _queue(sqs: Any, name: str = "inbox", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _receive(sqs: Any, url: str, **kwargs: Any) -> list[dict[str, Any]]:
    return list(sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", []))


def _timed_receive(sqs: Any, url: str, **kwargs: Any) -> tuple[list[dict[str, Any]], float]:
    started = time.monotonic()
    got = _receive(sqs, url, **kwargs)
    return got, time.monotonic() - started


# -- long polling ------------------------------------------------------------------------------


def test_long_poll_on_an_empty_queue_waits_then_returns_empty(sqs: Any) -> None:
    # GIVEN an empty queue
    url = _queue(sqs)
    # WHEN it is long-polled for 1 s
    got, elapsed = _timed_receive(sqs, url, WaitTimeSeconds=1)
    # THEN the answer is empty and came after the wait, not at once
    assert got == []
    assert 0.9 <= elapsed < 5


def test_short_poll_on_an_empty_queue_returns_at_once(sqs: Any) -> None:
    # GIVEN an empty queue whose default wait is 0
    url = _queue(sqs)
    # WHEN it is read without WaitTimeSeconds THEN the empty answer comes at once
    got, elapsed = _timed_receive(sqs, url)
    assert got == []
    assert elapsed < 0.5


def test_queue_receive_wait_time_applies_when_the_request_gives_none(sqs: Any) -> None:
    # GIVEN an empty queue with ReceiveMessageWaitTimeSeconds=1
    url = _queue(sqs, ReceiveMessageWaitTimeSeconds="1")
    # WHEN it is read without WaitTimeSeconds THEN the receive long-polls for 1 s
    got, elapsed = _timed_receive(sqs, url)
    assert got == []
    assert 0.9 <= elapsed < 5


def test_wait_time_seconds_zero_overrides_the_queue_wait(sqs: Any) -> None:
    # GIVEN an empty queue with ReceiveMessageWaitTimeSeconds=20
    url = _queue(sqs, ReceiveMessageWaitTimeSeconds="20")
    # WHEN it is read with WaitTimeSeconds=0 THEN the receive returns at once
    got, elapsed = _timed_receive(sqs, url, WaitTimeSeconds=0)
    assert got == []
    assert elapsed < 0.5


def test_long_poll_returns_as_soon_as_a_message_is_sent(sqs: Any) -> None:
    # GIVEN a receive long-polling an empty queue for 2 s
    url = _queue(sqs)
    sender = threading.Timer(0.3, lambda: sqs.send_message(QueueUrl=url, MessageBody="wake"))
    # WHEN another thread sends a message during the wait
    sender.start()
    try:
        got, elapsed = _timed_receive(sqs, url, WaitTimeSeconds=2)
    finally:
        sender.join()
    # THEN the receive returns that message before the wait ends
    assert [m["Body"] for m in got] == ["wake"]
    assert elapsed < 1.8


def test_long_poll_with_20_seconds_returns_a_waiting_message_at_once(sqs: Any) -> None:
    # GIVEN a queue holding a message
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="ready")
    # WHEN it is long-polled with the largest wait, 20 s
    got, elapsed = _timed_receive(sqs, url, WaitTimeSeconds=20)
    # THEN the message comes back without waiting
    assert [m["Body"] for m in got] == ["ready"]
    assert elapsed < 2


@pytest.mark.parametrize("wait", [-1, 21])
def test_wait_time_seconds_outside_0_to_20_is_rejected(sqs: Any, wait: int) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN it is read with an out-of-range wait THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=wait)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        f"Value {wait} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, "
        "if provided.")


@pytest.mark.parametrize("timeout", [-1, 43_201])
def test_receive_visibility_timeout_outside_0_to_43200_is_rejected(
    sqs: Any, timeout: int,
) -> None:
    url = _queue(sqs)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.receive_message(QueueUrl=url, VisibilityTimeout=timeout)
    assert caught.value.response["Error"]["Message"] == (
        f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and "
        "<= 43200, if provided.")


# -- MaxNumberOfMessages -----------------------------------------------------------------------


def test_receive_returns_one_message_by_default(sqs: Any) -> None:
    # GIVEN a queue holding three messages
    url = _queue(sqs)
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    # WHEN it is read without MaxNumberOfMessages THEN one message comes back
    assert len(_receive(sqs, url)) == 1


def test_receive_returns_at_most_ten_messages(sqs: Any) -> None:
    # GIVEN a queue holding twelve messages
    url = _queue(sqs)
    for i in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    # WHEN it is read with MaxNumberOfMessages=10 THEN ten distinct messages come back
    first = _receive(sqs, url, MaxNumberOfMessages=10)
    assert len({m["MessageId"] for m in first}) == 10
    # AND the next read returns the other two
    rest = _receive(sqs, url, MaxNumberOfMessages=10)
    assert {m["Body"] for m in first + rest} == {f"m{i}" for i in range(12)}


@pytest.mark.parametrize("count", [0, 11])
def test_max_number_of_messages_outside_1_to_10_is_rejected(sqs: Any, count: int) -> None:
    # GIVEN a queue holding a message
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    # WHEN it is read with an out-of-range MaxNumberOfMessages THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        f"Value {count} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 "
        "and 10, if provided.")


# -- system attributes -------------------------------------------------------------------------


def test_system_attributes_are_returned_only_when_asked_for(sqs: Any) -> None:
    # GIVEN a message
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="x")
    # WHEN it is received without AttributeNames THEN it carries no Attributes
    (message,) = _receive(sqs, url, VisibilityTimeout=0)
    assert "Attributes" not in message
    # WHEN one attribute is asked for THEN only that one comes back
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["SentTimestamp"])
    assert set(message["Attributes"]) == {"SentTimestamp"}


def test_all_system_attributes_follow_the_clock(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message sent at T
    url = _queue(sqs)
    sent_at = clock.now_ms()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    # WHEN it is first received at T+5 s and again at T+40 s
    clock.advance(5)
    (first,) = _receive(sqs, url, AttributeNames=["All"])
    clock.advance(35)
    (second,) = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    # THEN SentTimestamp is T, ApproximateFirstReceiveTimestamp stays T+5 s, the count grows
    assert first["Attributes"] == {
        "SenderId": ACCOUNT,
        "SentTimestamp": str(sent_at),
        "ApproximateReceiveCount": "1",
        "ApproximateFirstReceiveTimestamp": str(sent_at + 5_000),
    }
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    assert second["Attributes"]["ApproximateFirstReceiveTimestamp"] == str(sent_at + 5_000)
    assert second["Attributes"]["SentTimestamp"] == str(sent_at)


def test_aws_trace_header_is_kept_and_returned(sqs: Any) -> None:
    # GIVEN a message sent with an AWSTraceHeader system attribute
    url = _queue(sqs)
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    sqs.send_message(
        QueueUrl=url, MessageBody="traced",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
    )
    # WHEN it is received asking for AWSTraceHeader THEN the header comes back unchanged
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert message["Attributes"] == {"AWSTraceHeader": trace}
    # AND it is not mistaken for a user message attribute
    assert "MessageAttributes" not in message


def test_message_without_trace_header_has_none(sqs: Any) -> None:
    # GIVEN a message sent without system attributes
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    # WHEN all system attributes are asked for THEN AWSTraceHeader is absent
    (message,) = _receive(sqs, url, MessageSystemAttributeNames=["All"])
    assert "AWSTraceHeader" not in message["Attributes"]
    assert "SentTimestamp" in message["Attributes"]


def test_only_aws_trace_header_may_be_sent_as_a_system_attribute(sqs: Any) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a message is sent with another system attribute name THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.send_message(
            QueueUrl=url, MessageBody="x",
            MessageSystemAttributes={"SenderId": {"DataType": "String", "StringValue": "me"}},
        )
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        "Message system attribute name 'SenderId' is invalid.")


def test_one_receive_never_returns_a_message_twice(sqs: Any, clock: FakeClock) -> None:
    # GIVEN two expired messages at the head of a queue, then two live ones
    url = _queue(sqs, MessageRetentionPeriod="60")
    for body in ("expired-1", "expired-2"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    clock.advance(30)
    for body in ("live-1", "live-2"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    clock.advance(31)
    # WHEN three are asked for with a zero visibility timeout (claimed ones stay visible)
    got = _receive(sqs, url, MaxNumberOfMessages=3, VisibilityTimeout=0)
    # THEN each live message comes back once
    assert sorted(m["Body"] for m in got) == ["live-1", "live-2"]
