"""DynamoDB Local keeps every stream record in one SQLite table keyed by sequence number,
and every request to a table with a stream asks for that stream's lowest sequence number.
DMQ's shim (dmqlocal/store_shim.c) indexes the records by stream, in a new database and in
one an earlier version left without it, so that the question is a lookup, not a walk over
every record of the last 24 hours."""

from __future__ import annotations

import functools
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from dmqlocal.dynamodb_local import DynamoDBLocal, shim_library
from tests.e2e.dynamodb_local_clients import dynamodb_client, median_ms, streams_client

INDEX = "dmq_stream_records"
SHARD_INDEX = "dmq_shard_records"
TIME_INDEX = "dmq_record_times"
INDEXES = sorted([INDEX, SHARD_INDEX, TIME_INDEX])
# DynamoDB Local's trim of the records older than 24 hours (at start, among other times).
TRIM = "DELETE FROM us WHERE CreationDateTime < ?"
# The question DynamoDB Local asks on every request (SQLiteDBAccessJob.getStreamDescription).
LOWEST = "SELECT MIN(SequenceNumber) FROM us WHERE StreamID = ?"

pytestmark = pytest.mark.skipif(shim_library() is None,
                                reason="no C compiler: DynamoDB Local runs without DMQ's shim")


def _stream_table(dynamodb: Any, name: str) -> None:
    dynamodb.create_table(
        TableName=name, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})


def _write(dynamodb: Any, table: str, count: int, first_key: int = 0) -> None:
    """`count` new items, so `count` stream records (an unchanged item writes none)."""
    end = first_key + count
    for first in range(first_key, end, 25):
        dynamodb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"k": {"S": str(n)}, "v": {"S": "x" * 100}}}}
            for n in range(first, min(first + 25, end))]})


def _database(folder: Path) -> Path:
    files = list(folder.glob("*.db"))
    assert len(files) == 1, files
    return files[0]


def _indexes(database: Path) -> list[str]:
    with sqlite3.connect(database) as con:
        return sorted(row[0] for row in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'us'"))


def _plan(database: Path) -> str:
    with sqlite3.connect(database) as con:
        return " ".join(str(row[-1]) for row in con.execute(f"EXPLAIN QUERY PLAN {LOWEST}",
                                                            ("x",)))


def test_a_new_database_indexes_its_stream_records_and_the_lookup_uses_the_index(
    tmp_path: Path,
) -> None:
    store = DynamoDBLocal(tmp_path / "db")
    try:
        dynamodb = dynamodb_client(store.start())
        _stream_table(dynamodb, "t_1")
        _write(dynamodb, "t_1", 30)
        assert dynamodb.get_item(TableName="t_1", Key={"k": {"S": "7"}})["Item"]["v"]["S"]
    finally:
        store.stop()
    database = _database(tmp_path / "db")
    assert _indexes(database) == INDEXES
    assert INDEX in _plan(database)
    with sqlite3.connect(database) as con:  # the trim reads only what it deletes
        assert TIME_INDEX in " ".join(str(row[-1]) for row in con.execute(
            f"EXPLAIN QUERY PLAN {TRIM}", (0,)))
    with sqlite3.connect(database) as con:  # SQLite kept the index up to date
        assert con.execute("SELECT count(*) FROM us INDEXED BY dmq_stream_records "
                           "WHERE StreamID IS NOT NULL").fetchone()[0] == 30


def test_a_database_left_without_the_index_gets_it_at_the_next_start(tmp_path: Path) -> None:
    store = DynamoDBLocal(tmp_path / "db")
    try:
        dynamodb = dynamodb_client(store.start())
        _stream_table(dynamodb, "t_1")
        _write(dynamodb, "t_1", 5)
    finally:
        store.stop()
    database = _database(tmp_path / "db")
    with sqlite3.connect(database) as con:
        con.execute(f"DROP INDEX {INDEX}")
        con.execute(f"DROP INDEX {SHARD_INDEX}")
        con.execute(f"DROP INDEX {TIME_INDEX}")
    assert _indexes(database) == []
    store = DynamoDBLocal(tmp_path / "db")
    try:
        dynamodb = dynamodb_client(store.start())
        assert len(dynamodb.scan(TableName="t_1")["Items"]) == 5
        _write(dynamodb, "t_1", 10, first_key=5)  # writes (and their stream records) still work
    finally:
        store.stop()
    assert _indexes(database) == INDEXES
    with sqlite3.connect(database) as con:
        assert con.execute("SELECT count(*) FROM us").fetchone()[0] == 15


def test_in_memory_a_quiet_stream_table_costs_no_walk_over_another_tables_records() -> None:
    """Without the index a GetItem on a stream table with no records walks every record of
    the others: at 15,000 records about 8 ms against 2 ms on the busy table (in memory).
    The calls alternate, so a busy machine slows both alike; the bound is loose (twice the
    busy table's call, plus 1 ms), and the walk it guards against grows without bound."""
    store = DynamoDBLocal(None)
    try:
        dynamodb = dynamodb_client(store.start())
        _stream_table(dynamodb, "busy")
        _stream_table(dynamodb, "quiet")
        _write(dynamodb, "busy", 15_000)
        times: dict[str, list[float]] = {"busy": [], "quiet": []}
        for _ in range(60):
            for table, took in times.items():
                began = time.perf_counter()
                dynamodb.get_item(TableName=table, Key={"k": {"S": "1"}})
                took.append((time.perf_counter() - began) * 1000)
    finally:
        store.stop()
    busy, quiet = (statistics.median(times[t][10:]) for t in ("busy", "quiet"))
    assert quiet <= 2 * busy + 1.0, (quiet, busy)


def test_in_memory_a_read_at_a_streams_tip_costs_about_a_getitem_however_long_the_stream(
) -> None:
    """GetRecords asks for the shard's oldest record (a walk over every record before the
    shard's first without an index by shard) and reads from the iterator's position (a
    walk over the stream's records before it, had SQLite used the stream index; it reads
    along the sequence numbers instead). Without both, at the tip of a stream of 15,000
    records about 12 to 16 ms, against 1.5 ms for a GetItem."""
    store = DynamoDBLocal(None)
    try:
        endpoint = store.start()
        dynamodb, streams = dynamodb_client(endpoint), streams_client(endpoint)
        _stream_table(dynamodb, "busy")
        _stream_table(dynamodb, "quiet")
        _write(dynamodb, "busy", 15_000)
        _write(dynamodb, "quiet", 5)
        tips = {}
        for table in ("busy", "quiet"):
            arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
            shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
            tips[table] = streams.get_shard_iterator(
                StreamArn=arn, ShardId=shard["ShardId"],
                ShardIteratorType="LATEST")["ShardIterator"]
        # The oldest record of each is still there, and read from the start.
        horizon = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"],
            ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        assert len(streams.get_records(ShardIterator=horizon)["Records"]) == 5
        get_item = median_ms(lambda: dynamodb.get_item(TableName="busy", Key={"k": {"S": "1"}}))
        at_tip = {table: median_ms(functools.partial(streams.get_records, ShardIterator=it,
                                                     Limit=100))
                  for table, it in tips.items()}
    finally:
        store.stop()
    for table, took in at_tip.items():
        assert took <= 2 * get_item + 2.0, (table, took, get_item)
