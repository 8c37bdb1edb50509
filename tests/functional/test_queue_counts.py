"""GIVEN sends, receives and delays WHEN the approximate counts are read THEN they add up."""

from __future__ import annotations

from typing import Any

from app import runtime
from tests.clocks import FakeClock
from tests.dynamo_counter import DynamoCounter

COUNTS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def _counts(sqs: Any, url: str, names: list[str] | None = None) -> tuple[int, int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names or COUNTS)["Attributes"]
    visible, hidden, delayed = (int(found[n]) for n in COUNTS)
    return visible, hidden, delayed


def _queue(sqs: Any, name: str = "counted", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _send(sqs: Any, url: str, count: int, **kwargs: Any) -> None:
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", **kwargs)


def test_sent_messages_count_as_visible(sqs: Any) -> None:
    # GIVEN an empty queue WHEN three messages are sent
    url = _queue(sqs)
    _send(sqs, url, 3)
    # THEN three are visible, none in flight, none delayed
    assert _counts(sqs, url) == (3, 0, 0)


def test_received_messages_count_as_not_visible(sqs: Any) -> None:
    # GIVEN three messages WHEN two are received
    url = _queue(sqs)
    _send(sqs, url, 3)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert len(got) == 2
    # THEN one is visible and two are in flight
    assert _counts(sqs, url) == (1, 2, 0)


def test_in_flight_messages_return_to_visible_after_the_timeout(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN two messages in flight under the default 30 s visibility timeout
    url = _queue(sqs)
    _send(sqs, url, 2)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)
    # WHEN 29 s pass THEN still in flight; WHEN 30 s have passed THEN visible again
    clock.advance(29)
    assert _counts(sqs, url) == (0, 2, 0)
    clock.advance(1)
    assert _counts(sqs, url) == (2, 0, 0)


def test_deleted_messages_are_no_longer_counted(sqs: Any) -> None:
    # GIVEN two messages of which one is received and deleted
    url = _queue(sqs)
    _send(sqs, url, 2)
    got = sqs.receive_message(QueueUrl=url)["Messages"][0]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    # THEN one message is counted, as visible
    assert _counts(sqs, url) == (1, 0, 0)


def test_delayed_sends_count_as_delayed_until_due(sqs: Any, clock: FakeClock) -> None:
    # GIVEN one message sent now and two with a 10 s delay
    url = _queue(sqs)
    _send(sqs, url, 1)
    _send(sqs, url, 2, DelaySeconds=10)
    # THEN one is visible and two delayed
    assert _counts(sqs, url) == (1, 0, 2)
    # WHEN 10 s pass THEN all three are visible
    clock.advance(10)
    assert _counts(sqs, url) == (3, 0, 0)


def test_queue_delay_counts_new_messages_as_delayed(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a queue with DelaySeconds 30 WHEN two messages are sent
    url = _queue(sqs, DelaySeconds="30")
    _send(sqs, url, 2)
    # THEN both are delayed until 30 s have passed
    clock.advance(29)
    assert _counts(sqs, url) == (0, 0, 2)
    clock.advance(1)
    assert _counts(sqs, url) == (2, 0, 0)


def test_counts_are_returned_with_all(sqs: Any) -> None:
    # GIVEN a visible, an in-flight and a delayed message
    url = _queue(sqs)
    _send(sqs, url, 2)
    sqs.receive_message(QueueUrl=url)
    _send(sqs, url, 1, DelaySeconds=60)
    # WHEN All is asked for THEN the three counts are among the attributes
    assert _counts(sqs, url, ["All"]) == (1, 1, 1)


def test_counts_are_per_queue(sqs: Any) -> None:
    # GIVEN messages in one queue only
    busy = _queue(sqs, "busy")
    idle = _queue(sqs, "idle")
    _send(sqs, busy, 4)
    # WHEN the other queue's counts are read THEN they are zero
    assert _counts(sqs, idle) == (0, 0, 0)
    assert _counts(sqs, busy) == (4, 0, 0)


def _reads_of(count: Any) -> tuple[Any, dict[str, int]]:
    """What `count()` returns, and the store requests it made."""
    counter = DynamoCounter()
    counter.attach(runtime.backend().stores.of("default")._db)
    try:
        start = counter.snapshot()
        result = count()
        used = counter.snapshot() - start
    finally:
        counter.detach()
    return result, dict(used.calls)


def _to_second(clock: FakeClock, second: int) -> None:
    """Move the clock on to `second` of the next minute."""
    clock.advance((60_000 - clock.now_ms() % 60_000 + second * 1000) / 1000)


def test_a_count_read_of_messages_sent_this_minute_reads_no_index(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN messages sent (not delayed) this minute: their bucket is this minute's, but
    # they were visible when counted in
    url = _queue(sqs)
    _to_second(clock, 1)
    _send(sqs, url, 3)
    clock.advance(10)
    assert _counts(sqs, url) == (3, 0, 0)
    # WHEN the counts are read again in the same minute
    counts, used = _reads_of(lambda: _counts(sqs, url))
    # THEN they are the same, from the count item alone
    assert counts == (3, 0, 0)
    assert used == {"BatchGetItem": 1}


def test_a_message_delayed_to_later_this_minute_is_read_from_the_index_until_due(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN at second 1 of a minute, three messages sent and one delayed by 20 s
    url = _queue(sqs)
    _to_second(clock, 1)
    _send(sqs, url, 3)
    _send(sqs, url, 1, DelaySeconds=20)
    # WHEN the counts are read before it is due THEN the index says it is delayed
    clock.advance(5)
    counts, used = _reads_of(lambda: _counts(sqs, url))
    assert counts == (3, 0, 1)
    assert used.get("Query") == 1
    # AND once it is due (the same minute) it is visible, from the count item alone
    clock.advance(20)
    counts, used = _reads_of(lambda: _counts(sqs, url))
    assert counts == (4, 0, 0)
    assert used == {"BatchGetItem": 1}


def test_a_count_read_of_messages_that_hide_in_no_bucket_of_this_minute_reads_no_index(
        sqs: Any, dmq: Any, clock: FakeClock) -> None:
    # GIVEN messages sent a minute ago, one of them received for 10 minutes (its bucket is
    # a later minute; the others' is over)
    url = _queue(sqs)
    _send(sqs, url, 3)
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)
    clock.advance(60)
    assert _counts(sqs, url) == (2, 1, 0)
    # WHEN the counts are read again
    counts, used = _reads_of(lambda: _counts(sqs, url))
    # THEN they are the same, from the count item alone: no Query of the index
    assert counts == (2, 1, 0)
    assert used == {"BatchGetItem": 1}


def test_a_message_turning_visible_this_minute_is_still_counted_hidden(
        sqs: Any, clock: FakeClock) -> None:
    # GIVEN a message received with a visibility timeout that ends within this minute
    url = _queue(sqs)
    _send(sqs, url, 1)
    clock.advance((60_000 - clock.now_ms() % 60_000 + 1_000) / 1000)  # a minute's 1st second
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)
    # WHEN the counts are read before it ends THEN it is in flight (the index says so)
    assert _counts(sqs, url) == (0, 1, 0)
    # AND once it has ended it is visible again
    clock.advance(31)
    assert _counts(sqs, url) == (1, 0, 0)
