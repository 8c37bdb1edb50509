"""GIVEN writes that add or remove messages WHEN the approximate counts are read
THEN the per-shard counts kept from the stream agree, and reading them costs the same
whatever the backlog."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.backend.counters import ShardCounters
from chalicelib.domain.messages import Message
from chalicelib.service.messages import SendRequest
from tests.clocks import FakeClock
from tests.purges import remove_purged

ACCOUNT = "000000000000"
CONTROL_TABLE = "dmq-control"
COUNTS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def _counts(sqs: Any, url: str) -> tuple[int, int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    visible, hidden, delayed = (int(found[n]) for n in COUNTS)
    return visible, hidden, delayed


def _queue(sqs: Any, name: str = "counted", **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _send_batches(sqs: Any, url: str, count: int, **kwargs: Any) -> None:
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": f"m{start + i}", **kwargs}
                   for i in range(min(10, count - start))]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def _sweep(dmq: Client) -> None:
    event = dmq.events.generate_cw_event(
        source="aws.events", detail_type="Scheduled Event", detail={}, resources=[]
    )
    dmq.lambda_.invoke("sweep_retention", event)


def _slots(aws: Clients) -> dict[str, int]:
    """Every counter slot in the control table: key -> n."""
    found = aws.dynamodb.scan(TableName=CONTROL_TABLE)["Items"]
    return {str(i["key"]["S"]): int(i["n"]["N"]) for i in found
            if str(i["key"]["S"]).startswith("count#")}


# -- purge and expiry -------------------------------------------------------------------
def test_purge_leaves_nothing_counted_and_later_sends_count_again(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN 15 visible messages, 2 in flight and 3 delayed
    url = _queue(sqs)
    _send_batches(sqs, url, 15)
    _send_batches(sqs, url, 3, DelaySeconds=60)
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]) == 2
    assert _counts(sqs, url) == (13, 2, 3)
    # WHEN the queue is purged (and the background removed its messages) THEN nothing
    # is counted
    sqs.purge_queue(QueueUrl=url)
    remove_purged()
    assert _counts(sqs, url) == (0, 0, 0)
    # WHEN two messages are sent after the purge THEN exactly they are counted
    clock.advance(61)
    _send_batches(sqs, url, 2)
    assert _counts(sqs, url) == (2, 0, 0)


def test_expired_messages_leave_the_count_when_swept(
    sqs: Any, dmq: Client, clock: FakeClock
) -> None:
    # GIVEN 4 messages under a 60 s retention, and 2 sent 30 s later
    url = _queue(sqs, MessageRetentionPeriod="60")
    _send_batches(sqs, url, 4)
    clock.advance(30)
    _send_batches(sqs, url, 2)
    # WHEN the first 4 expire and the sweep runs twice
    clock.advance(31)
    _sweep(dmq)
    _sweep(dmq)
    # THEN only the 2 younger messages are counted: a second sweep subtracts nothing
    assert _counts(sqs, url) == (2, 0, 0)


def test_expired_messages_met_by_a_receive_leave_the_count(
    sqs: Any, dmq: Client, clock: FakeClock
) -> None:
    # GIVEN 3 messages past their 60 s retention
    url = _queue(sqs, MessageRetentionPeriod="60")
    _send_batches(sqs, url, 3)
    clock.advance(61)
    # WHEN a receive meets them (and deletes them) and then the sweep runs
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []) == []
    _sweep(dmq)
    # THEN none is counted, and the count did not go below what a new send adds
    _send_batches(sqs, url, 1)
    assert _counts(sqs, url) == (1, 0, 0)


# -- dead letters -----------------------------------------------------------------------
def test_dead_letter_moves_take_the_count_from_the_source_to_the_dlq(
    sqs: Any, clock: FakeClock
) -> None:
    # GIVEN a source queue that moves a message after one receive, holding 3 messages
    dlq = _queue(sqs, "dead")
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    policy = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    source = _queue(sqs, "work", RedrivePolicy=policy, VisibilityTimeout="5")
    _send_batches(sqs, source, 3)
    assert len(sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10)["Messages"]) == 3
    # WHEN their visibility ends and the next receive moves them to the DLQ
    clock.advance(5)
    assert sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10).get("Messages", []) == []
    # THEN the source counts none and the DLQ counts all 3 as visible
    assert _counts(sqs, source) == (0, 0, 0)
    assert _counts(sqs, dlq) == (3, 0, 0)
    # AND deleting one from the DLQ leaves 2 there
    got = sqs.receive_message(QueueUrl=dlq)["Messages"][0]
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=got["ReceiptHandle"])
    assert _counts(sqs, dlq) == (2, 0, 0)


# -- shards and concurrency -------------------------------------------------------------
def test_counts_add_up_over_several_shards(sqs: Any, aws: Clients) -> None:
    # GIVEN a queue of 4 shards holding 40 messages
    url = _queue(sqs, "wide", DmqShardCount="4")
    _send_batches(sqs, url, 40)
    # WHEN 10 are received and 6 of those deleted (one batch, spanning shards)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(got) == 10
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got[:6])]
    assert len(sqs.delete_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 6
    # THEN the counts are those of the whole queue
    assert _counts(sqs, url) == (30, 4, 0)
    # AND the counters of more than one shard hold them, 34 in all
    per_shard: Counter[str] = Counter()
    for key, n in _slots(aws).items():
        per_shard[key.rsplit("#", 2)[1]] += n
    assert len([s for s, n in per_shard.items() if n]) > 1
    assert sum(per_shard.values()) == 34


@pytest.fixture
def services(dmq: Client) -> Any:
    return runtime.services_for()


def test_concurrent_sends_are_counted_exactly(services: Any, aws: Clients) -> None:
    # GIVEN a queue of 2 shards WHEN 4 senders each send 10 batches of 10 at once
    queue = services.queues.create(ACCOUNT, "us-east-1", "busy", {"DmqShardCount": "2"}, {})

    def produce(index: int) -> None:
        for start in range(0, 100, 10):
            batch = [SendRequest(str(i), f"p{index}-{start + i}") for i in range(10)]
            assert not services.messages.send_batch(queue, batch)[1]

    with ThreadPoolExecutor(max_workers=4) as pool:
        for sent in [pool.submit(produce, i) for i in range(4)]:
            sent.result(timeout=60)  # re-raises what failed in the thread
    # THEN every send landed and the counts hold exactly 400, one count item per shard
    counts = services.messages.counts(queue, fresh=True)
    assert (counts.visible, counts.in_flight, counts.delayed) == (400, 0, 0)
    slots = _slots(aws)
    assert sum(slots.values()) == 400
    assert len(slots) == 2


# -- replicas ---------------------------------------------------------------------------
MESSAGES_TABLE = "dmq-messages"
REPLICATED = "000000000000/r"


def test_sync_replica_writes_count_only_what_they_wrote(services: Any, aws: Clients) -> None:
    # GIVEN a message written once with put_if_absent (a synchronous replica write)
    store = runtime.backend().stores.of("default")
    message = Message(message_id="m-1", body="b", body_md5="", sent_ms=1, visible_at=1,
                      expires_ms=10**13, sender_id="s")
    store.put_if_absent(REPLICATED, [(0, message)])
    # WHEN it is written again, with a second message
    store.put_if_absent(REPLICATED, [(0, message), (0, message.with_changes(message_id="m-2"))])
    # THEN the shard counts 2, once the stream is counted in
    runtime.count_catch_up("us-east-1")  # type: ignore[misc]
    assert ShardCounters(aws.dynamodb, CONTROL_TABLE).total(MESSAGES_TABLE, REPLICATED, 0) == 2


# -- read cost --------------------------------------------------------------------------
class _Reads:
    """Requests and items read on one botocore DynamoDB client, from its event hooks.

    Items read: a Query's ScannedCount, and each key a BatchGetItem asks for (DynamoDB
    charges a read for a key whether or not its item exists).
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: Counter[str] = Counter()
        self.items = 0

    def before(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls[model.name] += 1
        if model.name in ("BatchGetItem", "GetItem"):
            request = json.loads(params.get("body") or b"{}")
            self.items += sum(len(r["Keys"]) for r in request.get("RequestItems", {}).values())
            self.items += int("Key" in request)

    def after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name in ("Query", "Scan"):
            self.items += int(parsed.get("ScannedCount", 0))

    def __enter__(self) -> _Reads:
        self.client.meta.events.register("before-call.dynamodb", self.before)
        self.client.meta.events.register("after-call.dynamodb", self.after)
        return self

    def __exit__(self, *_: Any) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", self.before)
        self.client.meta.events.unregister("after-call.dynamodb", self.after)


@pytest.fixture
def message_client(dmq: Client) -> Iterator[Any]:
    yield runtime.backend().stores.of("default")._db  # type: ignore[attr-defined]


def _read_cost(sqs: Any, url: str, client: Any) -> tuple[dict[str, int], int]:
    with _Reads(client) as reads:
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    return dict(reads.calls), reads.items


def test_reading_the_counts_costs_the_same_at_10_and_2000_visible_messages(
    sqs: Any, services: Any, message_client: Any
) -> None:
    # GIVEN a queue of 2 shards with 10 visible messages, 3 in flight and 2 delayed
    url = _queue(sqs, "deep", DmqShardCount="2")
    _send_batches(sqs, url, 13)
    _send_batches(sqs, url, 2, DelaySeconds=60)
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3)["Messages"]) == 3
    assert _counts(sqs, url) == (10, 3, 2)
    # WHEN the counts are read
    small = _read_cost(sqs, url, message_client)
    # AND again once 1,990 more visible messages are stored (sent by the service, for speed)
    queue = services.queues.get(url.split("/")[-2], "deep")
    for start in range(0, 1990, 10):
        batch = [SendRequest(str(i), f"bulk-{start + i}") for i in range(10)]
        assert not services.messages.send_batch(queue, batch)[1]
    assert _counts(sqs, url) == (2000, 3, 2)
    large = _read_cost(sqs, url, message_client)
    # THEN the same requests were made and the same number of items read
    assert small == large
    assert small[0] and small[1] >= 5  # 3 in flight + 2 delayed, at least


def test_reading_the_counts_costs_the_same_at_5_and_1000_in_flight_or_delayed(
    sqs: Any, message_client: Any, clock: FakeClock,
) -> None:
    # GIVEN a queue with 3 messages in flight for ten minutes and 2 delayed by 15
    url = _queue(sqs, "hidden")
    _send_batches(sqs, url, 3)
    _send_batches(sqs, url, 2, DelaySeconds=900)
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3,
                                   VisibilityTimeout=600)["Messages"]) == 3
    assert _counts(sqs, url) == (0, 3, 2)
    # WHEN the counts are read
    small = _read_cost(sqs, url, message_client)
    # AND again once 600 more are in flight and 400 more delayed
    _send_batches(sqs, url, 600)
    for _ in range(60):
        assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                       VisibilityTimeout=600)["Messages"]) == 10
    _send_batches(sqs, url, 400, DelaySeconds=900)
    assert _counts(sqs, url) == (0, 603, 402)
    large = _read_cost(sqs, url, message_client)
    # THEN the same requests were made and the same number of items read: none of the
    # hidden messages is read, their minutes are all after this one, so the index is not
    # queried at all (the count item is the read: its older slots, which no version writes
    # any more, are not read, as its item shows it was counted by this one)
    assert small == large
    assert small == ({"BatchGetItem": 1}, 1)
    # AND once the delayed ones are due and the others' timeout has run out, all are visible
    clock.advance(901)
    assert _counts(sqs, url) == (1005, 0, 0)


def test_the_counts_of_many_shards_are_one_read(sqs: Any, message_client: Any) -> None:
    # GIVEN a queue of 8 shards holding 80 messages, 2 of them in flight
    url = _queue(sqs, "eight", DmqShardCount="8")
    _send_batches(sqs, url, 80)
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                                   VisibilityTimeout=600)["Messages"]) == 2
    assert _counts(sqs, url) == (78, 2, 0)
    # WHEN the counts are read THEN the 8 count items come in one BatchGetItem, not one each
    assert _read_cost(sqs, url, message_client) == ({"BatchGetItem": 1}, 8)


# -- FIFO -------------------------------------------------------------------------------
def _fifo(sqs: Any, name: str, **attributes: str) -> str:
    return _queue(sqs, f"{name}.fifo", FifoQueue="true", ContentBasedDeduplication="true",
                  DmqShardCount="4", **attributes)


def _send_groups(sqs: Any, url: str, groups: dict[str, int]) -> None:
    for group, count in groups.items():
        for i in range(count):
            sqs.send_message(QueueUrl=url, MessageBody=f"{group}-{i}", MessageGroupId=group)


@pytest.mark.parametrize("timeout", [15, 100])  # ends in this minute, and in a later one
def test_fifo_counts_follow_in_flight_groups_within_and_past_the_minute(
    sqs: Any, clock: FakeClock, timeout: int
) -> None:
    # GIVEN 9 messages in 7 groups over 4 shards (the clock is 20 s into its minute), and
    # a receive of 5 of them for `timeout` seconds
    url = _fifo(sqs, f"held{timeout}")
    _send_groups(sqs, url, {"a": 3, **{f"g{n}": 1 for n in range(6)}})
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=5,
                              VisibilityTimeout=timeout)["Messages"]
    assert len(got) == 5
    assert _counts(sqs, url) == (4, 5, 0)
    # WHEN time passes short of the timeout THEN they are still in flight
    clock.advance(timeout - 2)
    assert _counts(sqs, url) == (4, 5, 0)
    # AND once it has run out, all 9 are visible again
    clock.advance(3)
    assert _counts(sqs, url) == (9, 0, 0)


def test_fifo_counts_of_delayed_groups(sqs: Any, clock: FakeClock) -> None:
    # GIVEN a FIFO queue delaying by 30 s: a group waiting on its head's delay counts as
    # one delayed message (its others are visible behind it)
    url = _fifo(sqs, "delayed", DelaySeconds="30")
    _send_groups(sqs, url, {"a": 1, "b": 1, "c": 2})
    assert _counts(sqs, url) == (1, 0, 3)
    clock.advance(29)
    assert _counts(sqs, url) == (1, 0, 3)
    clock.advance(2)
    assert _counts(sqs, url) == (4, 0, 0)


def test_the_counts_of_a_fifo_queue_of_many_shards_are_one_read(
    sqs: Any, clock: FakeClock, message_client: Any
) -> None:
    # GIVEN a FIFO queue of 4 shards with messages in 8 groups, 3 in flight for 10 minutes
    url = _fifo(sqs, "wide")
    _send_groups(sqs, url, {f"g{n}": 2 for n in range(8)})
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3,
                                   VisibilityTimeout=600)["Messages"]) == 3
    clock.advance(61)  # past the minute of the sends and the receive
    assert _counts(sqs, url) == (13, 3, 0)
    # WHEN the counts are read THEN the 4 count items come in one BatchGetItem, and no
    # group item is read: none of them turns visible in this minute
    assert _read_cost(sqs, url, message_client) == ({"BatchGetItem": 1}, 4)
