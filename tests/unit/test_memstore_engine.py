"""The in-memory store's engine (dmqlocal/memstore), called directly: what DMQ's contract
tests (tests/contract) do not reach: pages over sorted partitions and indexes in both
directions, TTL, the stream's cap, expiring iterators, idempotent transactions, limits."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dmqlocal.memstore import streams
from dmqlocal.memstore.engine import Engine
from dmqlocal.memstore.errors import StoreError

KEY = "dmq-local"
REGION = "us-east-1"


def _call(engine: Engine, operation: str, **request: Any) -> dict[str, Any]:
    return engine.call(KEY, REGION, operation, request)


def _error(engine: Engine, operation: str, **request: Any) -> StoreError:
    with pytest.raises(StoreError) as raised:
        _call(engine, operation, **request)
    return raised.value


@pytest.fixture
def engine() -> Engine:
    """A store with a messages-like table: pk/sk, an LSI on visible_at, a stream, TTL."""
    store = Engine()
    _call(store, "CreateTable", TableName="msgs", BillingMode="PAY_PER_REQUEST",
          KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                     {"AttributeName": "sk", "KeyType": "RANGE"}],
          AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                {"AttributeName": "sk", "AttributeType": "S"},
                                {"AttributeName": "visible_at", "AttributeType": "N"}],
          LocalSecondaryIndexes=[{
              "IndexName": "visible", "Projection": {"ProjectionType": "KEYS_ONLY"},
              "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                            {"AttributeName": "visible_at", "KeyType": "RANGE"}]}],
          StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    _call(store, "UpdateTimeToLive", TableName="msgs",
          TimeToLiveSpecification={"AttributeName": "expires_at", "Enabled": True})
    return store


def _put(engine: Engine, sk: str, visible_at: int | None = None, **extra: Any) -> None:
    item = {"pk": {"S": "q"}, "sk": {"S": sk}, **extra}
    if visible_at is not None:
        item["visible_at"] = {"N": str(visible_at)}
    _call(engine, "PutItem", TableName="msgs", Item=item)


def _sks(answer: dict[str, Any]) -> list[str]:
    return [item["sk"]["S"] for item in answer["Items"]]


def test_a_query_pages_a_partition_in_order_both_ways(engine: Engine) -> None:
    # GIVEN ten items
    for n in range(10):
        _put(engine, f"m{n}")
    query = {"TableName": "msgs", "KeyConditionExpression": "pk = :pk AND sk > :after",
             "ExpressionAttributeValues": {":pk": {"S": "q"}, ":after": {"S": "m2"}},
             "Limit": 3}
    # WHEN it is read three at a time, forward and backward
    seen: dict[bool, list[str]] = {}
    for forward in (True, False):
        start: dict[str, Any] | None = None
        seen[forward] = []
        for _ in range(5):
            page = _call(engine, "Query", ScanIndexForward=forward, **query,
                         **({"ExclusiveStartKey": start} if start else {}))
            seen[forward] += _sks(page)
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
    # THEN each item after m2 comes once, in order
    assert seen[True] == [f"m{n}" for n in range(3, 10)]
    assert seen[False] == [f"m{n}" for n in range(9, 2, -1)]


def test_an_index_query_pages_ties_by_the_table_key(engine: Engine) -> None:
    # GIVEN items sharing index values, and one without the index key (not indexed)
    for n in range(6):
        _put(engine, f"m{n}", visible_at=100 + n // 2)
    _put(engine, "unindexed")
    query = {"TableName": "msgs", "IndexName": "visible",
             "KeyConditionExpression": "pk = :pk AND visible_at BETWEEN :lo AND :hi",
             "ExpressionAttributeValues": {":pk": {"S": "q"}, ":lo": {"N": "100"},
                                           ":hi": {"N": "101"}}, "Limit": 1}
    # WHEN the index is read one at a time, forward then backward
    found: dict[bool, list[str]] = {}
    for forward in (True, False):
        start: dict[str, Any] | None = None
        found[forward] = []
        for _ in range(10):
            page = _call(engine, "Query", ScanIndexForward=forward, **query,
                         **({"ExclusiveStartKey": start} if start else {}))
            found[forward] += _sks(page)
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
    # THEN the four in range come once each, ordered by index value then table key
    assert found[True] == ["m0", "m1", "m2", "m3"]
    assert found[False] == ["m3", "m2", "m1", "m0"]
    # AND the keys-only projection holds the table's and the index's keys
    page = _call(engine, "Query", **query)
    assert set(page["Items"][0]) == {"pk", "sk", "visible_at"}


def test_a_select_count_counts_without_items(engine: Engine) -> None:
    for n in range(4):
        _put(engine, f"m{n}")
    answer = _call(engine, "Query", TableName="msgs", Select="COUNT",
                   KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                   ExpressionAttributeValues={":pk": {"S": "q"}, ":p": {"S": "m"}})
    assert answer["Count"] == 4
    assert "Items" not in answer


def test_expired_items_are_deleted_by_the_service(engine: Engine) -> None:
    # GIVEN an item whose TTL passed, one whose TTL is ahead, and one whose TTL is over
    # five years past (DynamoDB's TTL leaves those: a test clock near 1970, say)
    now = int(time.time())
    _put(engine, "old", expires_at={"N": str(now - 5)})
    _put(engine, "new", expires_at={"N": str(now + 3600)})
    _put(engine, "ancient", expires_at={"N": "305"})
    # WHEN the store sweeps
    deleted = engine.sweep()
    # THEN only the expired one is gone, with a REMOVE record by the service
    assert deleted == 1
    left = _call(engine, "Query", TableName="msgs", KeyConditionExpression="pk = :pk",
                 ExpressionAttributeValues={":pk": {"S": "q"}})
    assert _sks(left) == ["ancient", "new"]
    arn = _call(engine, "DescribeTable", TableName="msgs")["Table"]["LatestStreamArn"]
    shard = _call(engine, "DescribeStream", StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = _call(engine, "GetShardIterator", StreamArn=arn, ShardId=shard["ShardId"],
                     ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = _call(engine, "GetRecords", ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "INSERT", "INSERT", "REMOVE"]
    assert records[-1]["userIdentity"]["principalId"] == "dynamodb.amazonaws.com"


def test_a_stream_keeps_its_newest_records_and_says_when_older_were_trimmed(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a stream capped at 100 records and an iterator at its horizon
    monkeypatch.setattr(streams, "MAX_RECORDS", 100)
    arn = _call(engine, "DescribeTable", TableName="msgs")["Table"]["LatestStreamArn"]
    shard = _call(engine, "DescribeStream", StreamArn=arn)["StreamDescription"]["Shards"][0]
    _put(engine, "first")
    horizon = _call(engine, "GetShardIterator", StreamArn=arn, ShardId=shard["ShardId"],
                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    # WHEN far more records are written than it keeps
    for n in range(300):
        _put(engine, f"m{n}")
    # THEN the old iterator is refused as trimmed, and a new one reads the newest records
    assert _error(engine, "GetRecords", ShardIterator=horizon).code == \
        "TrimmedDataAccessException"
    fresh = _call(engine, "GetShardIterator", StreamArn=arn, ShardId=shard["ShardId"],
                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = _call(engine, "GetRecords", ShardIterator=fresh)["Records"]
    assert 100 <= len(records) <= 111
    assert records[-1]["dynamodb"]["NewImage"]["sk"] == {"S": "m299"}


def test_an_iterator_expires_after_fifteen_minutes(engine: Engine,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    arn = _call(engine, "DescribeTable", TableName="msgs")["Table"]["LatestStreamArn"]
    shard = _call(engine, "DescribeStream", StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = _call(engine, "GetShardIterator", StreamArn=arn, ShardId=shard["ShardId"],
                     ShardIteratorType="LATEST")["ShardIterator"]
    later = time.time() + 16 * 60
    monkeypatch.setattr(streams.time, "time", lambda: later)
    assert _error(engine, "GetRecords", ShardIterator=iterator).code == \
        "ExpiredIteratorException"


def test_an_unchanged_write_makes_no_stream_record(engine: Engine) -> None:
    _put(engine, "m1")
    _put(engine, "m1")
    arn = _call(engine, "DescribeTable", TableName="msgs")["Table"]["LatestStreamArn"]
    shard = _call(engine, "DescribeStream", StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = _call(engine, "GetShardIterator", StreamArn=arn, ShardId=shard["ShardId"],
                     ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert len(_call(engine, "GetRecords", ShardIterator=iterator)["Records"]) == 1


def test_a_repeated_transaction_token_applies_once(engine: Engine) -> None:
    # GIVEN a transaction that adds one to a counter
    items = [{"Update": {"TableName": "msgs", "Key": {"pk": {"S": "q"}, "sk": {"S": "c"}},
                         "UpdateExpression": "ADD n :one",
                         "ExpressionAttributeValues": {":one": {"N": "1"}}}}]
    # WHEN it is sent twice with one token (a retry), then with another token
    _call(engine, "TransactWriteItems", TransactItems=items, ClientRequestToken="t1")
    _call(engine, "TransactWriteItems", TransactItems=items, ClientRequestToken="t1")
    _call(engine, "TransactWriteItems", TransactItems=items, ClientRequestToken="t2")
    # THEN it was applied twice, and the token with other items is refused
    item = _call(engine, "GetItem", TableName="msgs",
                 Key={"pk": {"S": "q"}, "sk": {"S": "c"}})["Item"]
    assert item["n"] == {"N": "2"}
    other = [{**items[0]["Update"], "ExpressionAttributeValues": {":one": {"N": "5"}}}]
    assert _error(engine, "TransactWriteItems", TransactItems=[{"Update": other[0]}],
                  ClientRequestToken="t1").code == "IdempotentParameterMismatchException"


def test_limits_and_bad_requests_are_validation_errors(engine: Engine) -> None:
    big = {"S": "x" * (400 * 1024)}
    cases: list[tuple[str, dict[str, Any]]] = [
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}, "sk": {"S": "b"},
                                                   "body": big}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"N": "1"}, "sk": {"S": "a"}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": ""}, "sk": {"S": "a"}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}, "sk": {"S": "a"},
                                                   "visible_at": {"S": "soon"}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}, "sk": {"S": "a"},
                                                   "n": {"N": "1" * 40}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}, "sk": {"S": "a"},
                                                   "n": {"N": "twelve"}}}),
        ("PutItem", {"TableName": "msgs", "Item": {"pk": {"S": "q"}, "sk": {"S": "a"},
                                                   "s": {"SS": []}}}),
        ("GetItem", {"TableName": "msgs", "Key": {"pk": {"S": "q"}}}),
        ("UpdateItem", {"TableName": "msgs", "Key": {"pk": {"S": "q"}, "sk": {"S": "a"}},
                        "UpdateExpression": "SET sk = :v",
                        "ExpressionAttributeValues": {":v": {"S": "b"}}}),
        ("UpdateItem", {"TableName": "msgs", "Key": {"pk": {"S": "q"}, "sk": {"S": "a"}},
                        "UpdateExpression": "SET a = :v",
                        "ExpressionAttributeValues": {":v": {"S": "b"}, ":w": {"S": "c"}}}),
        ("BatchWriteItem", {"RequestItems": {"msgs": [
            {"PutRequest": {"Item": {"pk": {"S": "q"}, "sk": {"S": f"m{n}"}}}}
            for n in range(26)]}}),
        ("BatchWriteItem", {"RequestItems": {"msgs": [
            {"DeleteRequest": {"Key": {"pk": {"S": "q"}, "sk": {"S": "m"}}}}] * 2}}),
        ("TransactWriteItems", {"TransactItems": [
            {"Delete": {"TableName": "msgs", "Key": {"pk": {"S": "q"}, "sk": {"S": "m"}}}}]
            * 2}),
        ("Query", {"TableName": "msgs", "KeyConditionExpression": "sk = :s",
                   "ExpressionAttributeValues": {":s": {"S": "a"}}}),
    ]
    for operation, request in cases:
        error = _error(engine, operation, **request)
        assert error.code == "ValidationException", (operation, request, error.message)
        assert error.status == 400
    assert _error(engine, "GetItem", TableName="none",
                  Key={"pk": {"S": "q"}}).code == "ResourceNotFoundException"
    assert _error(engine, "Frobnicate").code == "UnknownOperationException"


def test_a_scan_splits_into_segments_that_cover_the_table_once(engine: Engine) -> None:
    # GIVEN items in many partitions
    for n in range(40):
        _call(engine, "PutItem", TableName="msgs",
              Item={"pk": {"S": f"q{n}"}, "sk": {"S": "m"}})
    # WHEN four segments are scanned, a page of 3 at a time
    found: list[str] = []
    for segment in range(4):
        start: dict[str, Any] | None = None
        for _ in range(50):
            page = _call(engine, "Scan", TableName="msgs", Segment=segment, TotalSegments=4,
                         Limit=3, **({"ExclusiveStartKey": start} if start else {}))
            found += [i["pk"]["S"] for i in page["Items"]]
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
    # THEN each item came once
    assert sorted(found) == sorted(f"q{n}" for n in range(40))
