"""A Scan of a table with a sort key pages in (hash of the partition key, sort key) order.
DynamoDB Local indexes the hash alone, so without DMQ's shim (dmqlocal/store_shim.c) each
page sorted the rows of a whole partition, and a page after the first could not seek to
its start key: a queue shard of a million messages cost seconds a page. The shim indexes
a scanned table by (hash, sort key) and prepares a later page's statement as seeks on it.
These tests hold it to DynamoDB Local's own answers: every item once, in the same order,
from any start key, and a page's cost that does not follow the size of its partition."""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from dmqlocal.dynamodb_local import DynamoDBLocal, shim_library
from tests.e2e.dynamodb_local_clients import dynamodb_client

pytestmark = pytest.mark.skipif(shim_library() is None,
                                reason="no C compiler: DynamoDB Local runs without DMQ's shim")

# Partition sizes: one item, a few, one larger than the pages, and some between.
PARTITIONS = {"a": 1, "b": 2, "c": 13, "d": 40, "e": 100, "f": 7}


def _table(dynamodb: Any, name: str) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST")


def _fill(dynamodb: Any, table: str, partitions: dict[str, int]) -> None:
    items = [{"pk": {"S": pk}, "sk": {"S": f"{n:06d}"}, "v": {"S": "x" * 40}}
             for pk, size in partitions.items() for n in range(size)]
    for first in range(0, len(items), 25):
        dynamodb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": item}} for item in items[first:first + 25]]})


def _key(item: dict[str, Any]) -> tuple[str, str]:
    return item["pk"]["S"], item["sk"]["S"]


def _scan(dynamodb: Any, table: str, limit: int | None = None,
          start: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    kwargs: dict[str, Any] = {"TableName": table}
    if limit is not None:
        kwargs["Limit"] = limit
    if start is not None:
        kwargs["ExclusiveStartKey"] = start
    keys: list[tuple[str, str]] = []
    for _ in range(10_000):
        page = dynamodb.scan(**kwargs)
        keys += [_key(item) for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return keys
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    raise AssertionError("the scan did not end")


def _as_key(key: tuple[str, str]) -> dict[str, Any]:
    return {"pk": {"S": key[0]}, "sk": {"S": key[1]}}


def test_a_paged_scan_returns_every_item_once_in_the_order_of_one_page() -> None:
    store = DynamoDBLocal(None)
    try:
        dynamodb = dynamodb_client(store.start())
        _table(dynamodb, "t_1")
        _fill(dynamodb, "t_1", PARTITIONS)
        whole = _scan(dynamodb, "t_1")  # one page: DynamoDB Local's own statement
        assert sorted(whole) == sorted((pk, f"{n:06d}") for pk, size in PARTITIONS.items()
                                       for n in range(size))
        # The partitions come in hash order, each in sort key order.
        assert [pk for pk, _ in whole] != sorted(pk for pk, _ in whole)
        for limit in (1, 7, 13, 100, 1000):
            assert _scan(dynamodb, "t_1", limit) == whole, limit
        # From any start key: the first, the last of a partition, one in the middle, the
        # last of all, and a key that is not there (deleted, or never written).
        gone = whole[30]
        dynamodb.delete_item(TableName="t_1", Key=_as_key(gone))
        left = [key for key in whole if key != gone]
        for at in (0, 1, 29, 30, 60, len(whole) - 1):
            after = [key for key in whole[at + 1:] if key != gone]
            assert _scan(dynamodb, "t_1", 9, _as_key(whole[at])) == after, at
        assert _scan(dynamodb, "t_1", 9, _as_key(("e", "999999"))) \
            == left[max(i for i, key in enumerate(left) if key[0] == "e") + 1:]
        # A filter is applied to the page's rows after the statement, as before.
        odd = dynamodb.scan(TableName="t_1", Limit=5, ExclusiveStartKey=_as_key(whole[3]),
                            FilterExpression="sk > :s",
                            ExpressionAttributeValues={":s": {"S": "000010"}})
        assert [_key(item) for item in odd["Items"]] \
            == [key for key in whole[4:9] if key[1] > "000010"]
    finally:
        store.stop()


def test_a_scanned_table_gets_the_order_index_and_keeps_it(tmp_path: Path) -> None:
    store = DynamoDBLocal(tmp_path / "db")
    try:
        dynamodb = dynamodb_client(store.start())
        _table(dynamodb, "t_1")
        _fill(dynamodb, "t_1", {"p": 30})
        assert len(_scan(dynamodb, "t_1", 4)) == 30
        _fill(dynamodb, "t_1", {"q": 5})  # writes after the index keep it up to date
        assert len(_scan(dynamodb, "t_1", 4)) == 35
    finally:
        store.stop()
    files = list((tmp_path / "db").glob("*.db"))
    assert len(files) == 1, files
    with sqlite3.connect(files[0]) as con:
        indexes = [row[0] for row in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 't_1'")]
        assert "dmq_scan:t_1" in indexes
        assert con.execute('SELECT count(*) FROM "t_1" INDEXED BY "dmq_scan:t_1" '
                           "WHERE hashValue IS NOT NULL").fetchone()[0] == 35


def test_a_page_costs_the_same_in_a_deep_partition_as_in_a_shallow_one() -> None:
    """Without the shim's statement a page of 100 from the end of a partition of 40,000
    sorted all 40,000 (about 15 ms against 3 ms in memory). The calls alternate, so a busy
    machine slows both alike; the bound is loose (twice the shallow page, plus 2 ms)."""
    store = DynamoDBLocal(None)
    try:
        dynamodb = dynamodb_client(store.start())
        _table(dynamodb, "deep")
        _table(dynamodb, "shallow")
        _fill(dynamodb, "deep", {"p": 40_000})
        _fill(dynamodb, "shallow", {"p": 200})
        starts = {"deep": _as_key(("p", f"{39_800:06d}")),
                  "shallow": _as_key(("p", f"{0:06d}"))}
        times: dict[str, list[float]] = {"deep": [], "shallow": []}
        for _ in range(30):
            for table, took in times.items():
                began = time.perf_counter()
                page = dynamodb.scan(TableName=table, Limit=100, ExclusiveStartKey=starts[table])
                took.append((time.perf_counter() - began) * 1000)
                assert len(page["Items"]) == 100
    finally:
        store.stop()
    deep, shallow = (statistics.median(times[t][5:]) for t in ("deep", "shallow"))
    assert deep <= 2 * shallow + 2.0, (deep, shallow)
