"""What DMQ relies on from its store, checked on moto, on DynamoDB Local and on the
in-memory store alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.backend import items
from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_sends import DynamoSends
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.backend.store import NewPuts, VisibilityChange
from chalicelib.domain.messages import Candidate, Message, MessageRef, VisibilityOutcome
from chalicelib.regions.replica import ReplicaApplier, is_tombstone
from dmqlocal.folders import FolderBodyStore
from dmqlocal.handlers import StreamBinding
from dmqlocal.pump import StreamPump
from tests.contract.conftest import DYNAMODB_LOCAL, MEMSTORE, MOTO, REGION, Store
from tests.unit.memory_store import MemoryStore

PK = "000000000000/q#0"


def _message(sk: str, visible_at: int, **extra: Any) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": sk}, "visible_at": {"N": str(visible_at)},
            "rc": {"N": "0"}, **extra}


def _claim(store: Store, sk: str, seen: int, until: int) -> None:
    store.dynamodb.update_item(
        TableName=store.messages, Key={"pk": {"S": PK}, "sk": {"S": sk}},
        UpdateExpression="SET visible_at = :until ADD rc :one",
        ConditionExpression="visible_at = :seen",
        ExpressionAttributeValues={":until": {"N": str(until)}, ":seen": {"N": str(seen)},
                                   ":one": {"N": "1"}})


def test_a_conditional_claim_wins_once_and_the_lost_race_fails(store: Store) -> None:
    # GIVEN a visible message
    store.dynamodb.put_item(TableName=store.messages, Item=_message("m1", 100))
    # WHEN two consumers claim it having seen the same visible_at
    _claim(store, "m1", seen=100, until=5000)
    with pytest.raises(ClientError) as lost:
        _claim(store, "m1", seen=100, until=6000)
    # THEN the first wins, the second fails its condition and changes nothing
    assert lost.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    item = store.dynamodb.get_item(TableName=store.messages,
                                   Key={"pk": {"S": PK}, "sk": {"S": "m1"}})["Item"]
    assert item["visible_at"] == {"N": "5000"}
    assert item["rc"] == {"N": "1"}


def test_a_cancelled_transaction_names_the_condition_that_failed(store: Store) -> None:
    # GIVEN two messages
    for sk in ("m1", "m2"):
        store.dynamodb.put_item(TableName=store.messages, Item=_message(sk, 100))
    key = {"pk": {"S": PK}}
    # WHEN a transaction deletes m1, moves m2 under a stale condition and adds m3
    with pytest.raises(ClientError) as cancelled:
        store.dynamodb.transact_write_items(TransactItems=[
            {"Delete": {"TableName": store.messages, "Key": {**key, "sk": {"S": "m1"}}}},
            {"Update": {"TableName": store.messages, "Key": {**key, "sk": {"S": "m2"}},
                        "UpdateExpression": "SET visible_at = :v",
                        "ConditionExpression": "visible_at = :seen",
                        "ExpressionAttributeValues": {":v": {"N": "1"},
                                                      ":seen": {"N": "99"}}}},
            {"Put": {"TableName": store.messages, "Item": _message("m3", 100)}},
        ])
    # THEN it is cancelled with a reason per item: only the second failed
    error = cancelled.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    codes = [reason["Code"] for reason in error["CancellationReasons"]]
    assert codes == ["None", "ConditionalCheckFailed", "None"]
    # AND nothing was written
    items = store.dynamodb.query(TableName=store.messages, KeyConditionExpression="pk = :pk",
                                 ExpressionAttributeValues={":pk": {"S": PK}})["Items"]
    assert sorted(i["sk"]["S"] for i in items) == ["m1", "m2"]


def _visible(store: Store, now: int, limit: int, start: dict[str, Any] | None) -> Any:
    return store.dynamodb.query(
        TableName=store.messages, IndexName="visible-index", Limit=limit,
        KeyConditionExpression="pk = :pk AND visible_at <= :now",
        ExpressionAttributeValues={":pk": {"S": PK}, ":now": {"N": str(now)}},
        **({"ExclusiveStartKey": start} if start else {}))


def test_the_visible_index_pages_in_visible_at_order(store: Store) -> None:
    # GIVEN five visible messages written out of order, and one not visible yet
    for sk, at in (("m1", 30), ("m2", 10), ("m3", 50), ("m4", 20), ("m5", 40), ("m6", 900)):
        store.dynamodb.put_item(TableName=store.messages, Item=_message(sk, at))
    # WHEN the index is read two by two up to now = 100
    pages: list[list[str]] = []
    start = None
    for _ in range(10):
        page = _visible(store, now=100, limit=2, start=start)
        pages.append([i["sk"]["S"] for i in page["Items"]])
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    # THEN the visible ones come in visible_at order, two per page, the last page short
    visible = [sk for page in pages for sk in page]
    assert visible == ["m2", "m4", "m1", "m5", "m3"]
    assert [len(p) for p in pages][:3] == [2, 2, 1]


def test_the_messages_table_has_ttl_on_expires_at(store: Store) -> None:
    # WHEN the table's TTL is described
    ttl = store.dynamodb.describe_time_to_live(TableName=store.messages)
    # THEN it is on, on the retention attribute
    assert ttl["TimeToLiveDescription"]["TimeToLiveStatus"] == "ENABLED"
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"


def _change_one_message(store: Store, sk: str) -> None:
    store.dynamodb.put_item(TableName=store.messages, Item=_message(sk, 100))
    _claim(store, sk, seen=100, until=200)
    store.dynamodb.delete_item(TableName=store.messages, Key={"pk": {"S": PK}, "sk": {"S": sk}})


def _read_stream(store: Store) -> list[dict[str, Any]]:
    arn = store.stream_arn(store.messages)
    records: list[dict[str, Any]] = []
    for shard in store.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = store.streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        page = store.streams.get_records(ShardIterator=iterator, Limit=1000)
        records += page["Records"]
    return records


def test_stream_records_come_in_order_with_both_images(store: Store) -> None:
    # GIVEN a message sent, claimed and deleted
    _change_one_message(store, "m1")
    # WHEN the stream is read from its horizon
    records = _read_stream(store)
    # THEN it holds the three changes in order, with old and new images
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert {r["dynamodb"]["StreamViewType"] for r in records} == {"NEW_AND_OLD_IMAGES"}
    insert, modify, remove = (r["dynamodb"] for r in records)
    assert "OldImage" not in insert and insert["NewImage"]["visible_at"] == {"N": "100"}
    assert modify["OldImage"]["visible_at"] == {"N": "100"}
    assert modify["NewImage"]["visible_at"] == {"N": "200"}
    assert "NewImage" not in remove and remove["OldImage"]["rc"] == {"N": "1"}
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(sequence)


def test_the_pump_hands_every_change_over_in_order(store: Store) -> None:
    # GIVEN a pump on the messages stream, started before anything was written
    seen: list[tuple[str, str]] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.extend((r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in event["Records"])
        assert {r["awsRegion"] for r in event["Records"]} == {REGION}

    pump = StreamPump(store.dynamodb, store.streams,
                      [StreamBinding(store.messages, handler, 2)], REGION)
    assert pump.poll_once() == 0
    # WHEN messages change, also after a write to another table's stream
    store.dynamodb.put_item(TableName=store.queues, Item={"queue_id": {"S": "a/q"}})
    _change_one_message(store, "m1")
    _change_one_message(store, "m2")
    moved = sum(pump.poll_once() for _ in range(5))
    # THEN the handler got every change once, in order
    assert moved == 6
    assert seen == [(e, sk) for sk in ("m1", "m2") for e in ("INSERT", "MODIFY", "REMOVE")]


def _only_shard(store: Store, table: str) -> tuple[str, str]:
    arn = store.stream_arn(table)
    shards = store.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    assert len(shards) == 1
    return arn, shards[0]["ShardId"]


def test_stream_records_name_the_store_region(store: Store) -> None:
    # GIVEN a message written through a client of us-east-1
    store.dynamodb.put_item(TableName=store.messages, Item=_message("m1", 100))
    # WHEN its stream record is read
    record = _read_stream(store)[0]
    arn = store.stream_arn(store.messages)
    # THEN moto and the in-memory store name the client's region, as DynamoDB does;
    # DynamoDB Local always says `ddblocal`
    expected = {MOTO: REGION, MEMSTORE: REGION, DYNAMODB_LOCAL: "ddblocal"}[store.name]
    assert record["awsRegion"] == expected
    assert arn.split(":")[3] == expected


def test_a_horizon_iterator_of_an_empty_shard_after_other_writes(store: Store) -> None:
    # GIVEN a horizon iterator of the empty messages shard, read once (nothing yet)
    arn, shard = _only_shard(store, store.messages)
    iterator = store.streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    iterator = store.streams.get_records(ShardIterator=iterator)["NextShardIterator"]
    # WHEN another table's stream gets a record before the shard's first one
    store.dynamodb.put_item(TableName=store.queues, Item={"queue_id": {"S": "a/q"}})
    store.dynamodb.put_item(TableName=store.messages, Item=_message("m1", 100))
    # THEN moto and the in-memory store give the record; DynamoDB Local calls the
    # position trimmed, and only a fresh horizon iterator reads it (the pump does that)
    if store.name in (MOTO, MEMSTORE):
        assert len(store.streams.get_records(ShardIterator=iterator)["Records"]) == 1
        return
    with pytest.raises(ClientError) as trimmed:
        store.streams.get_records(ShardIterator=iterator)
    assert trimmed.value.response["Error"]["Code"] == "TrimmedDataAccessException"
    assert len(_read_stream(store)) == 1


def test_empty_maps_in_stream_images_come_back_typed(store: Store) -> None:
    # GIVEN an item holding an empty map and an empty list (a queue record with no tags)
    item = _message("m1", 100, tags={"M": {}}, nested={"M": {"inner": {"M": {}}}},
                    items={"L": []})
    store.dynamodb.put_item(TableName=store.messages, Item=item)
    # WHEN the store's own stream is read, and when the pump hands the record over
    raw = _read_stream(store)[0]["dynamodb"]["NewImage"]
    handed: list[dict[str, Any]] = []
    pump = StreamPump(store.dynamodb, store.streams, [StreamBinding(
        store.messages, lambda event, _: handed.extend(event["Records"]), 10)], REGION)
    sum(pump.poll_once() for _ in range(3))
    # THEN DynamoDB Local's stream drops the empty map's type (moto and the in-memory
    # store keep it, as DynamoDB does) ...
    assert raw["tags"] == ({"M": {}} if store.name in (MOTO, MEMSTORE) else {})
    # ... and the pump hands over the image as it was written, fit to be written again
    image = handed[0]["dynamodb"]["NewImage"]
    assert image["tags"] == {"M": {}}
    assert image["nested"] == {"M": {"inner": {"M": {}}}}
    assert image["items"] == {"L": []}
    store.dynamodb.put_item(TableName=store.messages, Item={**image, "sk": {"S": "copy"}})


def _record(event: str, sequence: str, **image: Any) -> dict[str, Any]:
    keys = {"pk": {"S": PK}, "sk": {"S": "m1"}}
    data: dict[str, Any] = {"Keys": keys, "SequenceNumber": sequence}
    if event != "REMOVE":
        data["NewImage"] = {**keys, **image}
    return {"eventName": event, "dynamodb": data}


def test_the_replica_applier_writes_newer_changes_and_skips_older_ones(store: Store) -> None:
    # GIVEN the applier that copies stream records into a replica's table
    applier = ReplicaApplier(store.dynamodb, lambda: 1_000)
    # WHEN a change is applied, then an older one, then a removal
    newer = applier.apply(store.messages, [_record("INSERT", "200", body={"S": "new"})])
    older = applier.apply(store.messages, [_record("MODIFY", "100", body={"S": "old"})])
    key = {"pk": {"S": PK}, "sk": {"S": "m1"}}
    held = store.dynamodb.get_item(TableName=store.messages, Key=key)["Item"]
    removed = applier.apply(store.messages, [_record("REMOVE", "300")])
    # THEN the newer write holds, the older is skipped, and the removal leaves a tombstone
    assert (newer.applied, older.skipped, removed.applied) == (1, 1, 1)
    assert held["body"] == {"S": "new"}
    assert is_tombstone(store.dynamodb.get_item(TableName=store.messages, Key=key)["Item"])


def _dynamo_store(store: Store, tmp_path: Path,
                  inline_limit: int = 350_000) -> DynamoMessageStore:
    control = store.messages.replace("dmq-messages-", "dmq-control-")
    return DynamoMessageStore(store.dynamodb, store.messages, FolderBodyStore(str(tmp_path)),
                              inline_limit, ShardCounters(store.dynamodb, control))


@pytest.mark.parametrize("twin", ["store", "memory"])
def test_a_dead_letter_move_that_lost_its_race_returns_false_and_changes_nothing(
    store: Store, tmp_path: Path, twin: str,
) -> None:
    # GIVEN a message another receiver claimed after this one saw it (at visible_at 100)
    messages: Any = _dynamo_store(store, tmp_path) if twin == "store" else MemoryStore()
    sent = Message("m1", "poison", "md5", sent_ms=1, visible_at=100, expires_ms=10**13)
    messages.put_messages("a/src", [(0, sent)])
    seen = Candidate(0, "m1", 100, 10**13, 0)
    assert messages.claim("a/src", 0, seen, 5000, "winner", 100) is not None
    # WHEN the dead-letter move runs on what it saw
    moved = messages.move("a/src", 0, seen, "a/dlq", 0, 60_000, 200)
    # THEN it reports the lost race, and the message stays the winner's in the source
    assert moved is False
    assert messages.peek("a/dlq", 0, 10) == []
    (kept,) = messages.peek("a/src", 0, 10)
    assert (kept.claim_token, kept.visible_at) == ("winner", 5000)


@pytest.mark.parametrize("twin", ["store", "memory"])
def test_any_claim_deletes_and_changes_a_message_under_a_newer_claim(
    store: Store, tmp_path: Path, twin: str,
) -> None:
    # GIVEN a message claimed twice: "old" first, then "new"
    messages: Any = _dynamo_store(store, tmp_path) if twin == "store" else MemoryStore()
    messages.put_messages("a/q", [(0, Message("m1", "b", "md5", sent_ms=1, visible_at=100,
                                              expires_ms=10**13))])
    assert messages.claim("a/q", 0, Candidate(0, "m1", 100, 10**13, 0), 150, "old", 100)
    assert messages.claim("a/q", 0, Candidate(0, "m1", 150, 10**13, 1), 5000, "new", 200)
    old = MessageRef("a/q", 0, "m1", "old")
    # WHEN the old claim changes the visibility: only with any_claim does it act
    assert messages.change_visibility([VisibilityChange(old, 9000)], 300) == [
        VisibilityOutcome.NOT_FOUND]
    assert messages.change_visibility([VisibilityChange(old, 9000, any_claim=True)], 300) == [
        VisibilityOutcome.CHANGED]
    (kept,) = messages.peek("a/q", 0, 10)
    assert (kept.claim_token, kept.visible_at) == ("new", 9000)
    # AND once visible again, a change under any claim is not in flight
    assert messages.change_visibility([VisibilityChange(old, 20_000, any_claim=True)],
                                      9500) == [VisibilityOutcome.NOT_IN_FLIGHT]
    # WHEN the old claim deletes: a stale claim deletes nothing, any_claim deletes it
    messages.delete_claimed([old])
    assert len(messages.peek("a/q", 0, 10)) == 1
    messages.delete_claimed([old], any_claim=True)
    assert messages.peek("a/q", 0, 10) == []
    # AND a change for a message that is gone is not found, a second delete is harmless
    assert messages.change_visibility([VisibilityChange(old, 20_000, any_claim=True)],
                                      9500) == [VisibilityOutcome.NOT_FOUND]
    messages.delete_claimed([old], any_claim=True)


def _sent(n: int, sent_ms: int = 1, body: str = "b") -> Message:
    return Message(f"m{n}", body, "md5", sent_ms=sent_ms, visible_at=100, expires_ms=10**13)


@pytest.mark.parametrize("twin", ["store", "memory"])
def test_new_puts_write_only_where_no_item_stands(
    store: Store, tmp_path: Path, twin: str,
) -> None:
    # GIVEN a stored message
    messages: Any = _dynamo_store(store, tmp_path) if twin == "store" else MemoryStore()
    assert messages.put_new("a/q", [(0, _sent(0))]) == NewPuts(written=frozenset({"m0"}))
    # WHEN another attempt (sent later) names it again in a batch with three new ones
    puts = messages.put_new("a/q", [(0, _sent(0, sent_ms=2))]
                            + [(n % 2, _sent(n, sent_ms=2)) for n in (1, 2, 3)])
    # THEN the new ones are written and the stored one is left as it was
    assert puts == NewPuts(frozenset({"m1", "m2", "m3"}), frozenset({"m0"}))
    assert [m.sent_ms for m in messages.peek("a/q", 0, 10) if m.message_id == "m0"] == [1]
    # AND a lone message that stands already is found too
    assert messages.put_new("a/q", [(1, _sent(1, sent_ms=3))]) == NewPuts(
        existing=frozenset({"m1"}))


def test_a_new_put_sent_twice_by_its_own_call_counts_as_written(
    store: Store, tmp_path: Path,
) -> None:
    # GIVEN a put that landed, its answer lost, so that the same items are put again
    messages = _dynamo_store(store, tmp_path)
    sends = DynamoSends(store.dynamodb, store.messages, lambda _, m: m,
                        FolderBodyStore(str(tmp_path)))
    placed = [(0, _sent(n)) for n in range(3)]
    assert sends.put("a/q", placed).written == {"m0", "m1", "m2"}
    # THEN the standing items are recognised as this call's own, alone or together
    assert sends.put("a/q", placed[:1]) == NewPuts(written=frozenset({"m0"}))
    assert sends.put("a/q", placed) == NewPuts(written=frozenset({"m0", "m1", "m2"}))
    assert len(messages.peek("a/q", 0, 10)) == 3


def test_a_retried_large_message_keeps_the_objects_of_the_first(
    store: Store, tmp_path: Path,
) -> None:
    # GIVEN a message whose body goes to the body store, stored by a first attempt
    messages = _dynamo_store(store, tmp_path, inline_limit=100)
    body = "x" * 500
    assert messages.put_new("a/q", [(0, _sent(1, body=body))]).written == {"m1"}
    (first,) = messages.peek("a/q", 0, 10)
    # WHEN a retry (sent later) puts it again
    puts = messages.put_new("a/q", [(0, _sent(1, sent_ms=2, body=body))])
    # THEN it is found stored, its own object is gone and the first one is intact
    assert puts == NewPuts(existing=frozenset({"m1"}))
    (kept,) = messages.peek("a/q", 0, 10)
    assert (kept.body_key, kept.body, kept.sent_ms) == (first.body_key, body, 1)
    assert [p.name for p in (tmp_path / "bodies" / "a" / "q").iterdir()] == [
        Path(str(first.body_key)).name]


@pytest.mark.parametrize("twin", ["store", "memory"])
def test_claims_of_compact_and_wide_messages_return_them_whole(
    store: Store, tmp_path: Path, twin: str,
) -> None:
    # GIVEN a compact message (its index entry holds it) and a wide one (a body of 2 KB,
    # kept outside the index's projection), both visible
    messages: Any = _dynamo_store(store, tmp_path) if twin == "store" else MemoryStore()
    sent = [Message("m1", "small", "md5", sent_ms=1, visible_at=100, expires_ms=10**13),
            Message("m2", "w" * 2048, "md5", sent_ms=2, visible_at=100, expires_ms=10**13)]
    messages.put_messages("a/q", [(0, m) for m in sent])
    # WHEN the index is read and both are claimed together
    page = messages.find_candidates("a/q", 0, 200, 10, None)
    claims = [(c, f"token-{c.message_id}") for c in page.candidates]
    got = messages.claim_many("a/q", 0, claims, 5000, 200)
    # THEN each comes back whole, under its own claim, received once
    assert sorted((m.message_id, m.body, m.claim_token, m.receive_count, m.visible_at,
                   m.first_receive_ms) for m in got) == [
        ("m1", "small", "token-m1", 1, 5000, 200),
        ("m2", "w" * 2048, "token-m2", 1, 5000, 200)]
    if twin == "store":
        # AND the index held the compact one whole, and only the keys and state of the
        # wide one, whose entry stays within one write unit
        whole = {c.message_id: c.message is not None for c in page.candidates}
        assert whole == {"m1": True, "m2": False}
        entries = store.dynamodb.query(
            TableName=store.messages, IndexName="visible-index",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "a/q#0"}})["Items"]
        assert all(items.item_size(e) <= items.WRITE_UNIT_BYTES for e in entries), entries
