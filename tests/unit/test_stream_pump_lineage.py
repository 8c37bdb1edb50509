"""The stream pump's shard lineage, on a fake Streams API with a closed parent shard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dmqlocal.handlers import StreamBinding
from dmqlocal.pump import StreamPump
from dmqlocal.shards import ShardInfo, parents_first

ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/dmq-messages/stream/2026-01-01T00:00:00"
PARENT, CHILD = "shardId-00000000000000000001-aaaaaaaa", "shardId-00000000000000000002-bbbbbbbb"


class FakeDynamoDB:
    def describe_table(self, TableName: str) -> dict[str, Any]:
        return {"Table": {"LatestStreamArn": ARN}}


class FakeStreams:
    """A stream whose closed parent holds records 1, 2 and whose open child holds 3, 4;
    DescribeStream lists the child first, one shard per page; GetRecords gives one record."""

    def __init__(self) -> None:
        self.records = {PARENT: ["1", "2"], CHILD: ["3", "4"]}
        self.reads: list[str] = []
        self.pages: list[str | None] = []

    def list_streams(self, TableName: str) -> dict[str, Any]:
        return {"Streams": [{"StreamArn": ARN, "TableName": TableName,
                             "StreamLabel": ARN.rsplit("/", 1)[1]}]}

    def describe_stream(self, StreamArn: str, ExclusiveStartShardId: str | None = None
                        ) -> dict[str, Any]:
        self.pages.append(ExclusiveStartShardId)
        shards = [{"ShardId": CHILD, "ParentShardId": PARENT,
                   "SequenceNumberRange": {"StartingSequenceNumber": "3"}},
                  {"ShardId": PARENT, "SequenceNumberRange": {
                      "StartingSequenceNumber": "1", "EndingSequenceNumber": "2"}}]
        index = 0 if ExclusiveStartShardId is None else 1
        page: dict[str, Any] = {"Shards": [shards[index]]}
        if index == 0:
            page["LastEvaluatedShardId"] = CHILD
        return {"StreamDescription": page}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, ShardIteratorType: str,
                           SequenceNumber: str | None = None) -> dict[str, Any]:
        held = self.records[ShardId]
        start = held.index(SequenceNumber) + 1 if SequenceNumber else 0
        return {"ShardIterator": f"{ShardId}|{start}"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        shard, _, start = ShardIterator.partition("|")
        self.reads.append(shard)
        held, position = self.records[shard], int(start)
        out = [{"eventName": "INSERT", "dynamodb": {
            "SequenceNumber": seq, "Keys": {"sk": {"S": f"m{seq}"}}}}
            for seq in held[position:position + 1]]
        position += len(out)
        result: dict[str, Any] = {"Records": out}
        if shard == CHILD or position < len(held):
            result["NextShardIterator"] = f"{shard}|{position}"
        return result


def _pump(streams: FakeStreams, seen: list[str], folder: Path) -> StreamPump:
    def handler(event: dict[str, Any], context: Any) -> None:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])

    return StreamPump(FakeDynamoDB(), streams,  # type: ignore[arg-type]
                      [StreamBinding("dmq-messages", handler, 10)], "us-east-1",
                      checkpoint_dir=folder)


def test_shards_are_ordered_parents_first() -> None:
    child, parent = ShardInfo(CHILD, PARENT, False), ShardInfo(PARENT, None, True)
    orphan = ShardInfo("shardId-orphan", "shardId-trimmed-away", False)
    assert parents_first([child, orphan, parent]) == [orphan, parent, child]


def test_the_child_is_read_after_its_parent_is_read_to_its_end(tmp_path: Path) -> None:
    # GIVEN a closed parent shard and its open child, listed child first over two pages
    streams, seen = FakeStreams(), list[str]()
    pump = _pump(streams, seen, tmp_path)
    # WHEN the pump makes several passes
    for _ in range(6):
        pump.poll_once()
    # THEN DescribeStream was paged, the parent read to its end before the child was read,
    # and the finished parent is not read again
    assert streams.pages[:2] == [None, CHILD]
    assert seen == ["1", "2", "3", "4"]
    first_child = streams.reads.index(CHILD)
    assert streams.reads[:first_child] == [PARENT, PARENT]
    assert PARENT not in streams.reads[first_child:]


def test_a_new_pump_skips_the_finished_parent(tmp_path: Path) -> None:
    # GIVEN a pump that has handed over both shards
    _pump_seen: list[str] = []
    first = _pump(FakeStreams(), _pump_seen, tmp_path)
    for _ in range(6):
        first.poll_once()
    # WHEN a new pump starts from the same checkpoints and a record reaches the child
    streams, seen = FakeStreams(), list[str]()
    streams.records[CHILD].append("5")
    second = _pump(streams, seen, tmp_path)
    for _ in range(3):
        second.poll_once()
    # THEN it reads only the child, from after its checkpoint
    assert seen == ["5"]
    assert set(streams.reads) == {CHILD}
