"""GIVEN the counts kept from the messages stream WHEN batches are replayed, split
differently, or come from a replica, and WHEN random operations run THEN every message is
counted exactly once, and the counts equal what the table holds."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.backend.counters import ShardCounters, changes_of
from chalicelib.backend.replica import SEQ, TOMB
from chalicelib.clock import FakeClock

CONTROL_TABLE = "dmq-control"
TABLE = "dmq-messages"
ARN = f"arn:aws:dynamodb:us-east-1:000000000000:table/{TABLE}/stream/2026-01-01T00:00:00.000"
QUEUE_ID = "000000000000/q"
PK = f"{QUEUE_ID}#0"


def _image(sk: str, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": sk}, "visible_at": {"N": "1"}, **extra}


def _record(seq: int, sk: str, old: dict[str, Any] | None, new: dict[str, Any] | None,
            ) -> dict[str, Any]:
    data: dict[str, Any] = {"Keys": {"pk": {"S": PK}, "sk": {"S": sk}},
                            "SequenceNumber": str(seq)}
    if old is not None:
        data["OldImage"] = old
    if new is not None:
        data["NewImage"] = new
    event = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return {"eventName": event, "eventSourceARN": ARN, "dynamodb": data}


def _insert(seq: int, sk: str) -> dict[str, Any]:
    return _record(seq, sk, None, _image(sk))


def _remove(seq: int, sk: str) -> dict[str, Any]:
    return _record(seq, sk, _image(sk), None)


@pytest.fixture
def counters(aws: Clients) -> ShardCounters:
    return ShardCounters(aws.dynamodb, CONTROL_TABLE)


def _total(counters: ShardCounters) -> int:
    return counters.total(TABLE, QUEUE_ID, 0)


def test_a_batch_handed_over_again_is_counted_once(counters: ShardCounters) -> None:
    # GIVEN five inserts and a removal, counted in
    batch = [_insert(i, f"m{i}") for i in range(1, 6)] + [_remove(6, "m1")]
    assert counters.apply_records(batch) == 1  # one write for the shard
    assert _total(counters) == 4
    # WHEN the same batch comes again (a retried handler) THEN nothing changes
    counters.apply_records(batch)
    assert _total(counters) == 4
    # WHEN a pump that restarted from an older checkpoint cuts it otherwise, with newer
    # records after it THEN only the newer ones count
    counters.apply_records([*batch[2:], _insert(7, "m7"), _remove(8, "m2")])
    counters.apply_records([*batch[4:], _insert(7, "m7"), _remove(8, "m2"), _insert(9, "m9")])
    assert _total(counters) == 5


def test_claims_and_visibility_changes_count_nothing_and_cost_nothing(
    counters: ShardCounters,
) -> None:
    claimed = _image("m1", rc={"N": "1"}, visible_at={"N": "99"})
    batch = [_insert(1, "m1"), _record(2, "m1", _image("m1"), claimed),
             _record(3, "m1", claimed, _image("m1"))]
    assert [c.delta for c in changes_of(batch)] == [1]
    assert counters.apply_records(batch[1:]) == 0  # no write at all


def test_fifo_bookkeeping_items_are_not_messages(counters: ShardCounters) -> None:
    # GIVEN a FIFO send: a message item, its group item, its dedup item, the sequence item
    batch = [_insert(1, "f#g 00000000000000000001"), _insert(2, "g#g"), _insert(3, "d#0#x"),
             _insert(4, "s#")]
    counters.apply_records(batch)
    # THEN one message is counted
    assert _total(counters) == 1


def test_replica_tombstones_count_as_removals_and_their_expiry_as_nothing(
    counters: ShardCounters,
) -> None:
    live = _image("m1", **{SEQ: {"S": "1".rjust(48, "0")}})
    tomb = {"pk": {"S": PK}, "sk": {"S": "m1"}, TOMB: {"N": "1"}, SEQ: {"S": "2".rjust(48, "0")}}
    counters.apply_records([_record(1, "m1", None, live)])
    assert _total(counters) == 1
    # WHEN the replicated removal replaces it by a tombstone THEN 0
    counters.apply_records([_record(2, "m1", live, tomb)])
    assert _total(counters) == 0
    # WHEN the tombstone expires (TTL) THEN still 0; a replayed insert over it is +1 again
    counters.apply_records([_record(3, "m1", tomb, None)])
    assert _total(counters) == 0


def test_counts_written_by_requests_before_are_kept(counters: ShardCounters, aws: Clients,
                                                    ) -> None:
    # GIVEN a shard counted on the request path by an earlier version (slots 0 to 3)
    for slot, n in enumerate([3, 2, 0, 1]):
        aws.dynamodb.put_item(TableName=CONTROL_TABLE, Item={
            **counters.key(TABLE, PK, slot), "n": {"N": str(n)}})
    # WHEN the stream counts two of those messages out and one new one in
    counters.apply_records([_remove(10, "a"), _remove(11, "b"), _insert(12, "c")])
    # THEN the total is right
    assert _total(counters) == 5


# -- random operations against the truth ------------------------------------------------
COUNTS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed"]


def _counts(sqs: Any, url: str) -> tuple[int, int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
    visible, hidden, delayed = (int(found[n]) for n in COUNTS)
    return visible, hidden, delayed


def _truth(aws: Clients, queue_id: str, now_ms: int) -> tuple[int, int, int]:
    """What the table holds for the queue, by scanning it."""
    visible = hidden = delayed = 0
    pages = aws.dynamodb.get_paginator("scan").paginate(TableName=TABLE)
    for item in (i for page in pages for i in page["Items"]):
        if not str(item["pk"]["S"]).startswith(f"{queue_id}#"):
            continue
        if int(item["visible_at"]["N"]) <= now_ms:
            visible += 1
        elif int(item["rc"]["N"]) > 0:
            hidden += 1
        else:
            delayed += 1
    return visible, hidden, delayed


def _step(sqs: Any, url: str, rng: random.Random, handles: list[str], clock: FakeClock) -> None:
    action = rng.choice(["send", "send", "batch", "receive", "delete", "delete_batch",
                         "visibility", "advance", "purge"])
    if action == "send":
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=rng.choice([0, 0, 5]))
    elif action == "batch":
        entries = [{"Id": str(i), "MessageBody": f"b{i}"} for i in range(rng.randint(1, 10))]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
    elif action == "receive":
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=rng.randint(1, 10),
                                  VisibilityTimeout=rng.choice([3, 30]))
        handles += [m["ReceiptHandle"] for m in got.get("Messages", [])]
    elif action == "delete" and handles:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handles.pop(rng.randrange(len(handles))))
    elif action == "delete_batch" and handles:
        chosen = [handles.pop() for _ in range(min(len(handles), rng.randint(1, 10)))]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chosen)])
    elif action == "visibility" and handles:
        # A handle whose message went visible meanwhile is refused, by SQS too.
        with contextlib.suppress(sqs.exceptions.ClientError):
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=rng.choice(handles),
                                          VisibilityTimeout=0)
    elif action == "advance":
        clock.advance(rng.choice([1, 4, 31]))
    elif action == "purge" and rng.random() < 0.2:
        sqs.purge_queue(QueueUrl=url)
        handles.clear()
        clock.advance(61)  # SQS allows one purge a minute


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_leave_counts_equal_to_the_table(
    sqs: Any, aws: Clients, clock: FakeClock, dmq: Client, seed: int,
) -> None:
    # GIVEN a queue of two shards
    url = sqs.create_queue(QueueName=f"random-{seed}", Attributes={"DmqShardCount": "2"},
                           )["QueueUrl"]
    queue_id = runtime.services_for().queues.get("000000000000", f"random-{seed}").queue_id
    rng = random.Random(seed)
    handles: list[str] = []
    # WHEN 120 random operations run, the counts checked every 20
    for step in range(120):
        _step(sqs, url, rng, handles, clock)
        if step % 20 == 19:
            # THEN what GetQueueAttributes says is exactly what the table holds
            assert _counts(sqs, url) == _truth(aws, queue_id, clock.now_ms())
    assert _counts(sqs, url) == _truth(aws, queue_id, clock.now_ms())
