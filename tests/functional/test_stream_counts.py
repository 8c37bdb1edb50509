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
from chalicelib import dynamo_sets
from chalicelib.aws import Clients
from chalicelib.backend.counters import ACTIVE, MAX_TERMS, ShardCounters, changes_of
from chalicelib.backend.hidden_counts import BUCKET_MS, HORIZON_MS
from chalicelib.clusters.shard_load import SLOT_MS
from chalicelib.domain.lanes import LANE_BASE
from chalicelib.regions.replica import SEQ, TOMB
from tests.clocks import FakeClock
from tests.purges import remove_purged

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
    # (one write for the shard, and one that marks it as counted from its start)
    assert counters.apply_records(batch) == 2
    assert _total(counters) == 4
    # WHEN the same batch comes again (a retried handler) THEN nothing changes
    counters.apply_records(batch)
    assert _total(counters) == 4
    # WHEN a pump that restarted from an older checkpoint cuts it otherwise, with newer
    # records after it THEN only the newer ones count
    counters.apply_records([*batch[2:], _insert(7, "m7"), _remove(8, "m2")])
    counters.apply_records([*batch[4:], _insert(7, "m7"), _remove(8, "m2"), _insert(9, "m9")])
    assert _total(counters) == 5


def test_a_shards_first_count_lists_it_and_marks_it_new_in_three_writes(
    counters: ShardCounters, aws: Clients,
) -> None:
    # GIVEN every UpdateItem the counter makes, counted
    updates: list[str] = []
    aws.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem",
        lambda params, **_: updates.append(params["UpdateExpression"]))
    # WHEN a shard never counted is counted for the first time
    counters.apply_records([_insert(1, "m1")])
    # THEN its count, its place in the active set, and its marks (listed, and counted
    # from its start: nothing of it hidden from its buckets) are three writes
    assert len(updates) == 3, updates
    item = aws.dynamodb.get_item(TableName=CONTROL_TABLE, Key=counters.key(TABLE, PK))["Item"]
    assert item["listed"] == {"BOOL": True} and item["hnew"] == {"BOOL": True}
    assert PK in dynamo_sets.members(aws.dynamodb, CONTROL_TABLE, ACTIVE + TABLE)
    # AND a later count of it is one write
    updates.clear()
    counters.apply_records([_insert(2, "m2")])
    assert len(updates) == 1, updates
    assert _total(counters) == 2


def test_claims_and_visibility_changes_in_the_past_count_nothing_and_cost_nothing(
    counters: ShardCounters,
) -> None:
    claimed = _image("m1", rc={"N": "1"}, visible_at={"N": "99"})
    batch = [_insert(1, "m1"), _record(2, "m1", _image("m1"), claimed),
             _record(3, "m1", claimed, _image("m1"))]
    assert [c.delta for c in changes_of(batch, NOW)] == [1]
    assert counters.apply_records(batch[1:]) == 0  # no write at all


# -- in flight and delayed: minute buckets ----------------------------------------------
NOW = FakeClock().now_ms()
MINUTE = BUCKET_MS


def _message(sk: str, visible_at: int, rc: int = 0) -> dict[str, Any]:
    return _image(sk, visible_at={"N": str(visible_at)}, rc={"N": str(rc)})


@pytest.fixture
def timed(aws: Clients, clock: FakeClock) -> ShardCounters:
    return ShardCounters(aws.dynamodb, CONTROL_TABLE, clock=clock)


def _hidden(counters: ShardCounters, now_ms: int) -> tuple[int, int, int]:
    return counters.read(TABLE, QUEUE_ID, 0).hidden(now_ms)


def _item(aws: Clients, counters: ShardCounters) -> dict[str, Any]:
    return aws.dynamodb.get_item(TableName=CONTROL_TABLE, Key=counters.key(TABLE, PK))["Item"]


def test_claims_and_visibility_changes_move_messages_between_buckets(
    timed: ShardCounters, clock: FakeClock,
) -> None:
    now = clock.now_ms()
    end_of_minute = (now // MINUTE + 1) * MINUTE
    sent, delayed = _message("m1", now), _message("m2", now + 5 * MINUTE)
    claimed = _message("m1", now + 10 * MINUTE, rc=1)
    # GIVEN a send, a delayed send and a claim of the first for ten minutes, in one batch
    batch = [_record(1, "m1", None, sent), _record(2, "m2", None, delayed),
             _record(3, "m1", sent, claimed)]
    # THEN one write counts them, and one more marks the shard as counted from its start
    assert timed.apply_records(batch) == 2
    # AND the buckets after this minute hold 1 in flight and 1 delayed
    assert _hidden(timed, now) == (1, 1, end_of_minute)
    # WHEN the visibility is changed to 20 minutes, then the message deleted
    extended = _message("m1", now + 20 * MINUTE, rc=1)
    assert timed.apply_records([_record(4, "m1", claimed, extended)]) == 1
    assert _hidden(timed, now) == (1, 1, end_of_minute)
    assert timed.apply_records([_record(5, "m1", extended, None)]) == 1
    # THEN only the delayed message is hidden, and once its minute is past, none
    assert _hidden(timed, now) == (0, 1, end_of_minute)
    assert _hidden(timed, now + 6 * MINUTE)[:2] == (0, 0)
    assert timed.total(TABLE, QUEUE_ID, 0) == 1


def test_a_fifo_group_weighs_what_it_holds_in_flight(timed: ShardCounters, clock: FakeClock,
                                                    ) -> None:
    now = clock.now_ms()
    held = _message("g#g", now + 5 * MINUTE, rc=3)
    waiting = _message("g#h", now + 5 * MINUTE)
    timed.apply_records([_record(1, "g#g", None, held), _record(2, "g#h", None, waiting),
                         _record(3, "f#g 1", None, _message("f#g 1", now + 9 * MINUTE))])
    assert _hidden(timed, now)[:2] == (3, 1)


def test_past_buckets_are_neither_written_nor_kept(
    timed: ShardCounters, clock: FakeClock, aws: Clients,
) -> None:
    now = clock.now_ms()
    # GIVEN a message delayed by two minutes, counted in
    delayed = _message("m1", now + 2 * MINUTE)
    timed.apply_records([_record(1, "m1", None, delayed)])
    bucket = f"d{(now + 2 * MINUTE) // MINUTE}"
    assert int(_item(aws, timed)[bucket]["N"]) == 1
    # WHEN ten minutes later it is deleted, and another message sent
    clock.advance(600)
    timed.apply_records([_record(2, "m1", delayed, None),
                         _record(3, "m2", None, _message("m2", clock.now_ms()))])
    # THEN its bucket is gone (not left at 0, nor taken below it) and the count is right
    item = _item(aws, timed)
    assert bucket not in item
    assert [name for name in item if name.startswith("d")] == [f"d{clock.now_ms() // MINUTE}"]
    assert timed.total(TABLE, QUEUE_ID, 0) == 1
    # AND the load slots of ten minutes ago are gone too: only this batch's are kept
    slot = clock.now_ms() // SLOT_MS
    assert sorted(n for n in item if n[0] in "io") == [f"i{slot}", f"o{slot}"]


def test_a_batch_over_many_minutes_is_written_in_runs(timed: ShardCounters, clock: FakeClock,
                                                     ) -> None:
    now = clock.now_ms()
    # GIVEN 300 messages claimed for 300 different minutes
    batch = [_record(i + 1, f"m{i}", None, _message(f"m{i}", now + (i + 2) * MINUTE, rc=1))
             for i in range(300)]
    # THEN the writes are runs of at most MAX_TERMS // 2 buckets and second hints (a
    # bucket and a hint for each minute), and every one counts
    assert timed.apply_records(batch) == 1 + -(-600 // (MAX_TERMS // 2))
    assert _hidden(timed, now)[:2] == (300, 0)
    # AND handed over again, it counts nothing twice
    timed.apply_records(batch)
    assert _hidden(timed, now)[:2] == (300, 0)
    assert _hidden(timed, now + 150 * MINUTE)[:2] == (151, 0)


def test_a_shard_counted_by_an_earlier_version_reads_the_index_until_the_horizon(
    timed: ShardCounters, clock: FakeClock, aws: Clients,
) -> None:
    now = clock.now_ms()
    # GIVEN a shard whose count item was kept before buckets were (messages in flight then
    # are in no bucket)
    aws.dynamodb.put_item(TableName=CONTROL_TABLE, Item={
        **timed.key(TABLE, PK), "n": {"N": "4"}, "seq": {"S": "0".rjust(48, "0")}})
    assert _hidden(timed, now) == (0, 0, LANE_BASE)
    # WHEN this version counts a record of it
    timed.apply_records([_record(1, "m9", None, _message("m9", now + 3 * MINUTE, rc=1))])
    # THEN its counts still read the whole hidden range of the index, until every message
    # hidden before it had to turn visible
    assert _hidden(timed, now) == (0, 0, LANE_BASE)
    later = now + HORIZON_MS
    assert _hidden(timed, later) == (0, 0, (later // MINUTE + 1) * MINUTE)


def test_a_new_shard_with_request_path_counts_reads_the_index_until_the_horizon(
    timed: ShardCounters, clock: FakeClock, aws: Clients,
) -> None:
    now = clock.now_ms()
    aws.dynamodb.put_item(TableName=CONTROL_TABLE, Item={
        **timed.key(TABLE, PK, 2), "n": {"N": "1"}})
    assert _hidden(timed, now) == (0, 0, LANE_BASE)
    timed.apply_records([_record(1, "m1", None, _message("m1", now))])
    assert _hidden(timed, now) == (0, 0, LANE_BASE)
    assert _hidden(timed, now + HORIZON_MS)[2] < LANE_BASE


def test_a_shard_never_counted_holds_nothing_hidden(timed: ShardCounters, clock: FakeClock,
                                                   ) -> None:
    now = clock.now_ms()
    assert _hidden(timed, now) == (0, 0, (now // MINUTE + 1) * MINUTE)


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
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=rng.choice([0, 0, 5, 900]))
    elif action == "batch":
        entries = [{"Id": str(i), "MessageBody": f"b{i}"} for i in range(rng.randint(1, 10))]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
    elif action == "receive":
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=rng.randint(1, 10),
                                  VisibilityTimeout=rng.choice([3, 30, 600]))
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
                                          VisibilityTimeout=rng.choice([0, 0, 150]))
    elif action == "advance":
        clock.advance(rng.choice([1, 4, 31, 61, 300]))
    elif action == "purge" and rng.random() < 0.2:
        sqs.purge_queue(QueueUrl=url)
        handles.clear()
        # The purged messages leave the table, as the local server's timer removes them
        # within seconds (the counts of a purge still being removed are approximate:
        # tests/functional/test_purge_in_background.py).
        remove_purged()
        clock.advance(61)  # SQS allows one purge a minute


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
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
