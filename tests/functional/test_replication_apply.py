"""GIVEN real writes on the home messages table (us-east-1) and its actual stream records
WHEN the records are applied to the replica table (eu-west-1) once, replayed, reversed
or shuffled
THEN the replica's live items equal the home's, nothing rolls back or comes back, and
tombstones stay out of the visibility index."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chalicelib.domain.exceptions import StoreError
from chalicelib.regions.replica import (
    SEQ,
    TOMB,
    TOMBSTONE_TTL_S,
    ApplyResult,
    ReplicaApplier,
    is_tombstone,
    live_item,
    padded,
)
from dmqlocal.pump import to_lambda_record
from infra import provision

HOME, REPLICA = "us-east-1", "eu-west-1"
MESSAGES = "dmq-messages"
Q0, Q1 = "000000000000/q#0", "000000000000/q#1"
NOW_MS = 1_900_000_000_000  # the injected apply clock, later than any stream record
Key = tuple[str, str]


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    """DMQ's tables, from the template, in both regions of one moto."""
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        made: dict[str, dict[str, Any]] = {}
        for region in (HOME, REPLICA):
            made[region] = {
                name: boto3.client(name, region_name=region)  # type: ignore[call-overload]
                for name in ("dynamodb", "dynamodbstreams", "s3")
            }
            provision.create_all(made[region]["dynamodb"], made[region]["s3"], region=region)
        yield made


@pytest.fixture
def home(clients: dict[str, dict[str, Any]]) -> Any:
    return clients[HOME]["dynamodb"]


@pytest.fixture
def replica(clients: dict[str, dict[str, Any]]) -> Any:
    return clients[REPLICA]["dynamodb"]


@pytest.fixture
def applier(replica: Any) -> ReplicaApplier:
    return ReplicaApplier(replica, lambda: NOW_MS)


# -- helpers ----------------------------------------------------------------------------
def _message(pk: str, sk: str, visible_at: int, body: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}, "visible_at": {"N": str(visible_at)},
            "body": {"S": body}, "rc": {"N": "0"}}


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _workload(db: Any) -> None:
    """Puts, updates, overwrites, deletes and a delete-then-reinsert, as a queue makes."""
    for i in range(6):
        db.put_item(TableName=MESSAGES, Item=_message(Q0, f"m{i}", 1000 + i, f"body-{i}"))
    db.put_item(TableName=MESSAGES, Item=_message(Q1, "n0", 2000, "other queue"))
    for rc in (1, 2):  # received twice: the later update must win
        db.update_item(
            TableName=MESSAGES, Key=_key(Q0, "m1"),
            UpdateExpression="SET visible_at = :v, rc = :rc",
            ExpressionAttributeValues={":v": {"N": str(5000 + rc)}, ":rc": {"N": str(rc)}},
        )
    db.delete_item(TableName=MESSAGES, Key=_key(Q0, "m2"))
    db.delete_item(TableName=MESSAGES, Key=_key(Q0, "m3"))
    db.put_item(TableName=MESSAGES, Item=_message(Q0, "m3", 3000, "reborn"))
    db.put_item(TableName=MESSAGES, Item=_message(Q0, "m4", 4000, "overwritten"))
    db.update_item(TableName=MESSAGES, Key=_key(Q0, "m5"), UpdateExpression="REMOVE visible_at")
    db.delete_item(TableName=MESSAGES, Key=_key(Q1, "n0"))


def _stream_records(region: dict[str, Any]) -> list[dict[str, Any]]:
    """Every record of the home messages table's stream, as Lambda delivers them."""
    arn = region["dynamodb"].describe_table(TableName=MESSAGES)["Table"]["LatestStreamArn"]
    streams = region["dynamodbstreams"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            if not page["Records"]:
                break
            records.extend(to_lambda_record(dict(r), arn, HOME) for r in page["Records"])
            iterator = page.get("NextShardIterator")
    return records


def _scan(db: Any) -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for page in db.get_paginator("scan").paginate(TableName=MESSAGES):
        for item in page["Items"]:
            found[(item["pk"]["S"], item["sk"]["S"])] = item
    return found


def _live(db: Any) -> dict[Key, dict[str, Any]]:
    """The replica as its home would hold it: bookkeeping stripped, tombstones dropped."""
    stripped = {key: live_item(item) for key, item in _scan(db).items()}
    return {key: item for key, item in stripped.items() if item is not None}


def _apply_in_batches(applier: ReplicaApplier, records: list[dict[str, Any]],
                      rng: random.Random) -> ApplyResult:
    total = ApplyResult()
    start = 0
    while start < len(records):
        size = rng.randint(1, 5)
        part = applier.apply(MESSAGES, records[start : start + size])
        total.applied += part.applied
        total.skipped += part.skipped
        total.lags_ms.extend(part.lags_ms)
        start += size
    return total


def _record(event: str, sk: str, seq: str, body: str = "b", created: float = 1.0e9,
            visible_at: int = 1) -> dict[str, Any]:
    """A hand-made Lambda stream record for the replica's messages table."""
    data: dict[str, Any] = {"Keys": _key(Q0, sk), "SequenceNumber": seq,
                            "ApproximateCreationDateTime": created}
    if event != "REMOVE":
        data["NewImage"] = _message(Q0, sk, visible_at, body)
    return {"eventName": event, "awsRegion": HOME, "eventSourceARN": "arn:test",
            "dynamodb": data}


# -- convergence ------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [1, 4, 1000])
def test_one_pass_leaves_the_replica_equal_to_the_home(
    clients: dict[str, dict[str, Any]], home: Any, replica: Any, applier: ReplicaApplier,
    batch: int,
) -> None:
    _workload(home)
    records = _stream_records(clients[HOME])
    assert {r["eventName"] for r in records} == {"INSERT", "MODIFY", "REMOVE"}
    applied = skipped = 0
    for start in range(0, len(records), batch):
        result = applier.apply(MESSAGES, records[start : start + batch])
        applied, skipped = applied + result.applied, skipped + result.skipped
    assert applied + skipped == len(records)
    if batch == 1:
        assert skipped == 0
    if batch == 1000:  # one write per item key: the rest are superseded within the batch
        assert applied == len({(r["dynamodb"]["Keys"]["sk"]["S"]) for r in records})
    assert _live(replica) == _scan(home)
    raw = _scan(replica)
    assert {k for k, item in raw.items() if is_tombstone(item)} == {(Q0, "m2"), (Q1, "n0")}
    assert all(SEQ in item for item in raw.values())


@pytest.mark.parametrize("seed", range(5))
def test_replays_and_any_order_never_roll_an_item_back(
    clients: dict[str, dict[str, Any]], home: Any, replica: Any, applier: ReplicaApplier,
    seed: int,
) -> None:
    _workload(home)
    records = _stream_records(clients[HOME])
    expected = _scan(home)
    rng = random.Random(seed)
    shuffled = records[:]
    rng.shuffle(shuffled)
    for order in (shuffled, records, list(reversed(records)), shuffled):
        _apply_in_batches(applier, order, rng)
        live = _live(replica)
        assert live == expected
        assert (Q0, "m2") not in live and (Q1, "n0") not in live  # deleted stays deleted
        assert live[(Q0, "m1")]["rc"] == {"N": "2"}  # the later update is kept
        assert live[(Q0, "m3")]["body"] == {"S": "reborn"}  # reinserted after its delete
        assert "visible_at" not in live[(Q0, "m5")]


def test_a_replay_is_skipped_entirely(
    clients: dict[str, dict[str, Any]], home: Any, replica: Any, applier: ReplicaApplier,
) -> None:
    _workload(home)
    records = _stream_records(clients[HOME])
    first = [applier.apply(MESSAGES, [r]) for r in records]
    assert sum(r.applied for r in first) == len(records)
    before = _scan(replica)
    for batch in ([[r] for r in records], [records], [list(reversed(records))]):
        results = [applier.apply(MESSAGES, b) for b in batch]
        assert sum(r.applied for r in results) == 0
        assert sum(r.skipped for r in results) == len(records)
        assert all(r.lags_ms == [] for r in results)
    assert _scan(replica) == before


def test_a_tombstone_stays_out_of_the_visible_index_and_keeps_the_item_removed(
    clients: dict[str, dict[str, Any]], home: Any, replica: Any, applier: ReplicaApplier,
) -> None:
    home.put_item(TableName=MESSAGES, Item=_message(Q0, "gone", 10, "x"))
    home.put_item(TableName=MESSAGES, Item=_message(Q0, "kept", 20, "y"))
    home.delete_item(TableName=MESSAGES, Key=_key(Q0, "gone"))
    records = _stream_records(clients[HOME])
    remove = next(r for r in records if r["eventName"] == "REMOVE")
    assert applier.apply(MESSAGES, [remove]).applied == 1  # the removal arrives first

    tomb = replica.get_item(TableName=MESSAGES, Key=_key(Q0, "gone"))["Item"]
    assert is_tombstone(tomb) and live_item(tomb) is None
    assert set(tomb) == {"pk", "sk", SEQ, TOMB, "expires_at"}
    assert int(tomb["expires_at"]["N"]) == NOW_MS // 1000 + TOMBSTONE_TTL_S
    assert tomb[SEQ] == {"S": padded(remove["dynamodb"]["SequenceNumber"])}

    late = applier.apply(MESSAGES, records)  # the older insert, replayed late
    assert late.skipped == 2 and late.applied == 1  # the insert of "gone" and the REMOVE
    page = replica.query(TableName=MESSAGES, IndexName="visible-index",
                         KeyConditionExpression="pk = :p",
                         ExpressionAttributeValues={":p": {"S": Q0}})
    assert [item["sk"]["S"] for item in page["Items"]] == ["kept"]
    assert _live(replica) == _scan(home)


def test_a_synchronously_written_copy_is_overwritten_by_the_first_stream_record(
    clients: dict[str, dict[str, Any]], home: Any, replica: Any, applier: ReplicaApplier,
) -> None:
    sent = _message(Q0, "sync", 100, "as sent")
    home.put_item(TableName=MESSAGES, Item=sent)
    replica.put_item(TableName=MESSAGES, Item=sent)  # the sender's copy: no _rseq
    home.update_item(TableName=MESSAGES, Key=_key(Q0, "sync"),
                     UpdateExpression="SET visible_at = :v, rc = :rc",
                     ExpressionAttributeValues={":v": {"N": "900"}, ":rc": {"N": "1"}})
    insert, modify = _stream_records(clients[HOME])

    assert applier.apply(MESSAGES, [insert]).applied == 1
    copy = replica.get_item(TableName=MESSAGES, Key=_key(Q0, "sync"))["Item"]
    assert copy[SEQ] == {"S": padded(insert["dynamodb"]["SequenceNumber"])}
    assert applier.apply(MESSAGES, [modify]).applied == 1
    assert applier.apply(MESSAGES, [insert]).skipped == 1
    assert _live(replica) == _scan(home)

    # a stale synchronous copy (written as sent, after the change) is replaced too
    replica.put_item(TableName=MESSAGES, Item=_message(Q0, "late", 1, "as sent"))
    assert applier.apply(MESSAGES, [_record("MODIFY", "late", "5", "moved")]).applied == 1
    late = replica.get_item(TableName=MESSAGES, Key=_key(Q0, "late"))["Item"]
    assert late["body"] == {"S": "moved"}


# -- sequence numbers, batching, lag, faults --------------------------------------------
def test_sequence_numbers_of_any_length_compare_numerically(
    replica: Any, applier: ReplicaApplier,
) -> None:
    low, high = "9" * 39, "1" + "0" * 39  # 40 digits: past a DynamoDB number's 38
    assert applier.apply(MESSAGES, [_record("INSERT", "s", high, "new")]).applied == 1
    assert applier.apply(MESSAGES, [_record("INSERT", "s", low, "old")]).skipped == 1
    assert applier.apply(MESSAGES, [_record("MODIFY", "s", "7", "older")]).skipped == 1
    item = replica.get_item(TableName=MESSAGES, Key=_key(Q0, "s"))["Item"]
    assert item["body"] == {"S": "new"} and item[SEQ] == {"S": padded(high)}
    # AND longer ones (LocalStack's have 56 digits) sort after, numerically among themselves
    longer = ["1" + "0" * 48, "9" * 49, "1" + "0" * 55, "2" + "0" * 55, "1" * 128]
    assert sorted([padded(n) for n in longer] + [padded(high)]) == [
        padded(n) for n in [high, *longer]]
    assert padded("0" * 60 + "7") == padded("7")
    with pytest.raises(ValueError):
        padded("1" * 129)
    with pytest.raises(ValueError):
        padded("12a")


def test_a_batch_writes_only_the_newest_change_of_each_item(
    replica: Any, applier: ReplicaApplier,
) -> None:
    calls: list[str] = []
    replica.meta.events.register("before-call.dynamodb.PutItem",
                                 lambda **kw: calls.append("put"))
    batch = [_record("MODIFY", "a", "30", "a3"), _record("INSERT", "a", "10", "a1"),
             _record("INSERT", "b", "11", "b1"), _record("MODIFY", "a", "20", "a2"),
             _record("REMOVE", "b", "12")]
    result = applier.apply(MESSAGES, batch)
    assert (result.applied, result.skipped, len(calls)) == (2, 3, 2)
    assert live_item(replica.get_item(TableName=MESSAGES, Key=_key(Q0, "a"))["Item"]) == (
        _message(Q0, "a", 1, "a3"))
    assert is_tombstone(replica.get_item(TableName=MESSAGES, Key=_key(Q0, "b"))["Item"])


def test_lag_is_apply_time_minus_creation_time(replica: Any) -> None:
    ticks = iter(range(1_000_000_000_500, 1_000_000_100_000, 100))
    applier = ReplicaApplier(replica, lambda: next(ticks))
    batch = [_record("INSERT", "x", "1", created=1_000_000_000.25),
             _record("INSERT", "y", "2", created=999_999_999.0),
             _record("INSERT", "x", "0", created=1.0)]  # superseded: no lag reported
    result = applier.apply(MESSAGES, batch)
    assert result.lags_ms == [250, 1_600]
    replay = applier.apply(MESSAGES, batch)
    assert (replay.applied, replay.skipped, replay.lags_ms) == (0, 3, [])


def test_lag_of_real_stream_records(
    clients: dict[str, dict[str, Any]], home: Any, applier: ReplicaApplier,
) -> None:
    _workload(home)
    records = _stream_records(clients[HOME])
    result = applier.apply(MESSAGES, records[:1])
    created = float(records[0]["dynamodb"]["ApproximateCreationDateTime"])
    assert result.lags_ms == [NOW_MS - round(created * 1000)]


def test_other_dynamodb_errors_propagate(replica: Any, applier: ReplicaApplier) -> None:
    with pytest.raises(StoreError, match="ResourceNotFoundException"):
        applier.apply("no-such-table", [_record("INSERT", "a", "1")])
    with pytest.raises(ValueError):
        applier.apply(MESSAGES, [{**_record("MODIFY", "a", "1"),
                                  "dynamodb": {"Keys": _key(Q0, "a"), "SequenceNumber": "2"}}])
