"""GIVEN the embedded store's fixes to moto WHEN transactions commit or are cancelled
THEN the table and its stream read exactly as DynamoDB documents, and moto keeps no
reference to the item objects it creates."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dmqlocal.embedded import EmbeddedAws

TABLE = "patched"


@pytest.fixture
def db() -> Iterator[Any]:
    embedded = EmbeddedAws()
    embedded.start()
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    for sk in ("a", "b", "c"):
        client.put_item(TableName=TABLE, Item={"pk": {"S": "p"}, "sk": {"S": sk},
                                               "n": {"N": "1"}})
    yield client
    embedded.stop()


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"S": sk}}


def _items(db: Any) -> dict[str, str]:
    found = db.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                     ExpressionAttributeValues={":p": {"S": "p"}})["Items"]
    return {i["sk"]["S"]: i["n"]["N"] for i in found}


def _stream_events(db: Any) -> list[str]:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = db.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
    return [r["eventName"] for r in records]


def _update(sk: str, condition: str = "n = :one") -> dict[str, Any]:
    return {"Update": {"TableName": TABLE, "Key": _key(sk), "UpdateExpression": "SET n = :two",
                       "ConditionExpression": condition,
                       "ExpressionAttributeValues": {":one": {"N": "1"}, ":two": {"N": "2"}}}}


def test_a_cancelled_transaction_changes_nothing_and_streams_nothing(db: Any) -> None:
    before = _stream_events(db)
    with pytest.raises(ClientError) as cancelled:
        db.transact_write_items(TransactItems=[
            _update("a"),
            {"Delete": {"TableName": TABLE, "Key": _key("b")}},
            {"Put": {"TableName": TABLE, "Item": {**_key("d"), "n": {"N": "9"}}}},
            _update("c", condition="n = :two"),  # fails: n is 1
        ])
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(db) == {"a": "1", "b": "1", "c": "1"}
    assert _stream_events(db) == before == ["INSERT"] * 3


def test_a_committed_transaction_is_applied_and_streamed(db: Any) -> None:
    db.transact_write_items(TransactItems=[
        _update("a"),
        {"Delete": {"TableName": TABLE, "Key": _key("b")}},
        {"Put": {"TableName": TABLE, "Item": {**_key("d"), "n": {"N": "9"}}}},
    ])
    assert _items(db) == {"a": "2", "c": "1", "d": "9"}
    assert _stream_events(db) == ["INSERT"] * 3 + ["MODIFY", "REMOVE", "INSERT"]
    # A later cancelled transaction leaves the committed state (and the stream) alone.
    with pytest.raises(ClientError):
        db.transact_write_items(TransactItems=[_update("c"), _update("a")])  # a is 2 now
    assert _items(db) == {"a": "2", "c": "1", "d": "9"}
    assert len(_stream_events(db)) == 6


def test_moto_keeps_no_reference_to_dynamodb_items(db: Any) -> None:
    from moto.dynamodb.models.dynamo_type import Item

    for n in range(20):
        db.put_item(TableName=TABLE, Item={**_key(f"x{n}"), "n": {"N": "1"}})
        db.transact_write_items(TransactItems=[_update(f"x{n}")])
    assert len(Item.instances_tracked) == 0  # type: ignore[attr-defined]


@pytest.fixture
def indexed() -> Iterator[Any]:
    """A table with a local index on `v`, two partitions of items in random index order."""
    embedded = EmbeddedAws()
    embedded.start()
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="indexed", BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t}
                              for n, t in (("pk", "S"), ("sk", "S"), ("v", "N"))],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{
            "IndexName": "by-v",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                          {"AttributeName": "v", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["x"]},
        }],
    )
    rng = random.Random(7)
    requests = []
    for n in range(300):
        item = {"pk": {"S": f"p{n % 2}"}, "sk": {"S": f"s{n:04d}"}, "x": {"S": "kept"},
                "y": {"S": "not projected"}}
        if n % 7:
            item["v"] = {"N": str(rng.randrange(50))}  # repeats: ties ordered by sk
        requests.append({"PutRequest": {"Item": item}})
    for start in range(0, len(requests), 25):
        client.batch_write_item(RequestItems={"indexed": requests[start:start + 25]})
    yield client
    embedded.stop()


def _expected(db: Any, pk: str, keep: Callable[[int], bool]) -> list[tuple[int, str]]:
    items = db.scan(TableName="indexed")["Items"]
    return sorted((int(i["v"]["N"]), i["sk"]["S"]) for i in items
                  if i["pk"]["S"] == pk and "v" in i and keep(int(i["v"]["N"])))


def _pages(db: Any, limit: int | None, condition: str, **extra: Any) -> list[list[Any]]:
    pages, start = [], None
    for _ in range(500):
        request: dict[str, Any] = {
            "TableName": "indexed", "IndexName": "by-v",
            "KeyConditionExpression": f"pk = :p AND {condition}",
            "ExpressionAttributeValues": {":p": {"S": "p1"}, ":a": {"N": "20"}}, **extra,
        }
        if limit:
            request["Limit"] = limit
        if start:
            request["ExclusiveStartKey"] = start
        page = db.query(**request)
        pages.append(page["Items"])
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    return pages


@pytest.mark.parametrize(("condition", "keep"), [
    ("v <= :a", lambda v: v <= 20),
    ("v > :a", lambda v: v > 20),
    ("v >= :a", lambda v: v >= 20),
])
@pytest.mark.parametrize("limit", [1, 7, 10, None])
def test_index_queries_page_exactly_as_moto_would(
    indexed: Any, condition: str, keep: Callable[[int], bool], limit: int | None
) -> None:
    pages = _pages(indexed, limit, condition)
    got = [(int(i["v"]["N"]), i["sk"]["S"]) for page in pages for i in page]
    assert got == _expected(indexed, "p1", keep)
    if limit:
        assert all(len(page) <= limit for page in pages)
        # moto (unlike DynamoDB) ends without a key when a page ends exactly at the end
        assert -(-len(got) // limit) <= len(pages) <= len(got) // limit + 1
    first = pages[0][0]
    assert first["x"] == {"S": "kept"} and "y" not in first  # the index's projection


def test_index_counts_and_scanned_counts_are_kept(indexed: Any) -> None:
    count = indexed.query(TableName="indexed", IndexName="by-v", Select="COUNT",
                          KeyConditionExpression="pk = :p AND v <= :a",
                          ExpressionAttributeValues={":p": {"S": "p0"}, ":a": {"N": "20"}})
    assert count["Count"] == count["ScannedCount"] == len(_expected(indexed, "p0",
                                                                    lambda v: v <= 20))
    page = indexed.query(TableName="indexed", IndexName="by-v", Limit=10,
                         KeyConditionExpression="pk = :p AND v <= :a",
                         ExpressionAttributeValues={":p": {"S": "p0"}, ":a": {"N": "20"}})
    assert page["Count"] == page["ScannedCount"] == 10


def test_index_pages_follow_updates_deletes_puts_and_cancelled_transactions(
    indexed: Any,
) -> None:
    rng = random.Random(11)
    keys = [f"s{n:04d}" for n in range(1, 300, 2)]  # the p1 partition

    def key(sk: str) -> dict[str, Any]:
        return {"pk": {"S": "p1"}, "sk": {"S": sk}}

    for round_ in range(12):
        _pages(indexed, 4, "v <= :a")  # build and walk the sorted view between changes
        for _ in range(15):
            sk = rng.choice(keys)
            move = rng.random()
            if move < 0.5:  # up or down, across the :a bound either way
                indexed.update_item(TableName="indexed", Key=key(sk), UpdateExpression="SET v = :v",
                                    ExpressionAttributeValues={":v": {"N": str(rng.randrange(40))}})
            elif move < 0.7:
                indexed.delete_item(TableName="indexed", Key=key(sk))
            elif move < 0.9:
                value = {"N": str(rng.randrange(40))}
                indexed.put_item(TableName="indexed", Item={**key(sk), "v": value})
            else:
                with pytest.raises(ClientError):
                    indexed.transact_write_items(TransactItems=[
                        {"Update": {"TableName": "indexed", "Key": key(sk),
                                    "UpdateExpression": "SET v = :v",
                                    "ExpressionAttributeValues": {":v": {"N": "0"}}}},
                        {"ConditionCheck": {"TableName": "indexed", "Key": key("s0001"),
                                            "ConditionExpression": "attribute_exists(nope)"}},
                    ])
        pages = _pages(indexed, 4, "v <= :a")
        got = [(int(i["v"]["N"]), i["sk"]["S"]) for page in pages for i in page]
        assert got == _expected(indexed, "p1", lambda v: v <= 20), f"round {round_}"
