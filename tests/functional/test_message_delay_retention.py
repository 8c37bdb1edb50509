"""GIVEN delayed or ageing messages WHEN the clock moves THEN delay and retention hold as in SQS."""

from __future__ import annotations

from typing import Any

import pytest
from chalice.test import Client

from chalicelib.aws import Clients
from tests.clocks import FakeClock

MESSAGES_TABLE = "dmq-messages"


def _queue(sqs: Any, name: str = "timed", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _bodies(sqs: Any, url: str, **kwargs: Any) -> list[str]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, **kwargs)
    return sorted(m["Body"] for m in found.get("Messages", []))


def _stored_ids(aws: Clients) -> set[str]:
    items = aws.dynamodb.scan(TableName=MESSAGES_TABLE)["Items"]
    return {str(item["sk"]["S"]) for item in items}


def _sweep(dmq: Client) -> None:
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[]
    )
    dmq.lambda_.invoke("sweep_retention", event)


# -- delay -------------------------------------------------------------------------------------


def test_queue_delay_hides_new_messages_for_delay_seconds(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a delay queue of 5 s and a message sent to it
    url = _queue(sqs, DelaySeconds="5")
    sqs.send_message(QueueUrl=url, MessageBody="later")
    # WHEN 4 s pass THEN it is not delivered
    clock.advance(4)
    assert _bodies(sqs, url) == []
    # WHEN the 5th second passes THEN it is
    clock.advance(1)
    assert _bodies(sqs, url) == ["later"]


def test_delayed_message_is_counted_as_delayed_not_visible(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message sent with a 60 s delay
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    # THEN the queue counts it as delayed
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert counts == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "1"}
    # WHEN the delay passes THEN it counts as visible
    clock.advance(60)
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert counts == {"ApproximateNumberOfMessages": "1", "ApproximateNumberOfMessagesDelayed": "0"}


def test_message_delay_overrides_the_queue_delay(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a delay queue of 60 s
    url = _queue(sqs, DelaySeconds="60")
    # WHEN one message is sent with DelaySeconds=0 and another with 10
    sqs.send_message(QueueUrl=url, MessageBody="now", DelaySeconds=0)
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=10)
    sqs.send_message(QueueUrl=url, MessageBody="queue-default")
    # THEN each follows its own delay
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["now"]
    clock.advance(10)
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["now", "soon"]
    clock.advance(50)
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["now", "queue-default", "soon"]


def test_message_delay_of_900_seconds_is_the_maximum(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message sent with the largest delay, 900 s
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="max", DelaySeconds=900)
    # THEN it is hidden at 899 s and delivered at 900 s
    clock.advance(899)
    assert _bodies(sqs, url) == []
    clock.advance(1)
    assert _bodies(sqs, url) == ["max"]


@pytest.mark.parametrize("delay", [-1, 901])
def test_message_delay_outside_0_to_900_is_rejected(sqs: Any, delay: int) -> None:
    # GIVEN a queue
    url = _queue(sqs)
    # WHEN a message is sent with an out-of-range delay THEN InvalidParameterValue
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=delay)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    # AND nothing was stored
    assert _bodies(sqs, url) == []


def test_batch_entries_carry_their_own_delay(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a batch with a 0 s, a 30 s and an out-of-range delay
    url = _queue(sqs)
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "a", "DelaySeconds": 0},
        {"Id": "b", "MessageBody": "b", "DelaySeconds": 30},
        {"Id": "c", "MessageBody": "c", "DelaySeconds": 901},
    ])
    # THEN the out-of-range entry fails alone
    assert sorted(e["Id"] for e in result["Successful"]) == ["a", "b"]
    assert [(e["Id"], e["Code"]) for e in result["Failed"]] == [("c", "InvalidParameterValue")]
    # AND the others follow their delays
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["a"]
    clock.advance(30)
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["a", "b"]


# -- retention ---------------------------------------------------------------------------------


def test_message_is_gone_once_the_retention_period_passes(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue that keeps messages 60 s and a message sent to it
    url = _queue(sqs, MessageRetentionPeriod="60")
    sqs.send_message(QueueUrl=url, MessageBody="short-lived")
    # WHEN 59 s pass THEN it is still there
    clock.advance(59)
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["short-lived"]
    # WHEN the 60th second passes THEN it is gone for good
    clock.advance(1)
    assert _bodies(sqs, url) == []
    clock.advance(3600)
    assert _bodies(sqs, url) == []


def test_retention_counts_from_the_send_not_from_the_last_receive(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a message received near the end of a 60 s retention, with a long visibility timeout
    url = _queue(sqs, MessageRetentionPeriod="60")
    sqs.send_message(QueueUrl=url, MessageBody="in-flight")
    clock.advance(50)
    assert _bodies(sqs, url, VisibilityTimeout=20) == ["in-flight"]
    # WHEN its visibility timeout ends after the retention period THEN it is not redelivered
    clock.advance(20)
    assert _bodies(sqs, url) == []


def test_expired_message_is_removed_from_the_table_on_receive(
    sqs: Any, clock: FakeClock, aws: Clients
) -> None:
    # GIVEN an expired message still in the table
    url = _queue(sqs, MessageRetentionPeriod="60")
    sent = sqs.send_message(QueueUrl=url, MessageBody="old")
    clock.advance(61)
    assert sent["MessageId"] in _stored_ids(aws)
    # WHEN a receive comes across it THEN it is deleted, not delivered
    assert _bodies(sqs, url) == []
    assert sent["MessageId"] not in _stored_ids(aws)


def test_retention_sweep_removes_only_expired_messages(
    sqs: Any, clock: FakeClock, aws: Clients, dmq: Client
) -> None:
    # GIVEN a 60 s queue and a 1-hour queue, each holding messages sent at the same time
    short = _queue(sqs, "short", MessageRetentionPeriod="60")
    long = _queue(sqs, "long", MessageRetentionPeriod="3600")
    expiring = {sqs.send_message(QueueUrl=short, MessageBody=f"s{i}")["MessageId"]
                for i in range(3)}
    kept = sqs.send_message(QueueUrl=long, MessageBody="l")["MessageId"]
    # WHEN 61 s pass and the scheduled retention sweep runs
    clock.advance(61)
    assert _stored_ids(aws) == {*expiring, kept}
    _sweep(dmq)
    # THEN the expired items are gone from the table and the other queue's message remains
    assert _stored_ids(aws) == {kept}
    assert _bodies(sqs, long) == ["l"]


def test_retention_sweep_keeps_messages_before_their_expiry(
    sqs: Any, clock: FakeClock, aws: Clients, dmq: Client
) -> None:
    # GIVEN a 60 s queue with a message 59 s old
    url = _queue(sqs, MessageRetentionPeriod="60")
    sent = sqs.send_message(QueueUrl=url, MessageBody="young")
    clock.advance(59)
    # WHEN the sweep runs THEN the message stays
    _sweep(dmq)
    assert _stored_ids(aws) == {sent["MessageId"]}
    assert _bodies(sqs, url) == ["young"]


def test_lowered_retention_expires_messages_already_in_the_queue(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a queue with the default 4-day retention holding a message 2 minutes old
    url = _queue(sqs)
    sqs.send_message(QueueUrl=url, MessageBody="old")
    clock.advance(120)
    sqs.send_message(QueueUrl=url, MessageBody="new")
    # WHEN its retention is lowered to 60 s
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    # THEN the older message has expired, and the newer one expires 60 s after its send
    assert _bodies(sqs, url, VisibilityTimeout=0) == ["new"]
    clock.advance(60)
    assert _bodies(sqs, url) == []

