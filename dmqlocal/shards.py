"""A stream's shards and their lineage, as DescribeStream tells them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient


@dataclass(frozen=True)
class ShardInfo:
    """One shard: its id, its parent's id, and whether it is closed (has an end)."""

    shard_id: str
    parent_id: str | None
    closed: bool


def describe_shards(streams: DynamoDBStreamsClient, stream_arn: str) -> list[ShardInfo]:
    """Every shard of the stream, following DescribeStream's pages, parents first."""
    shards: list[ShardInfo] = []
    start: dict[str, Any] = {}
    while True:
        described = streams.describe_stream(StreamArn=stream_arn, **start)["StreamDescription"]
        shards += [ShardInfo(s["ShardId"], s.get("ParentShardId"),
                             "EndingSequenceNumber" in s.get("SequenceNumberRange", {}))
                   for s in described.get("Shards", [])]
        last = described.get("LastEvaluatedShardId")
        if not last:
            return parents_first(shards)
        start = {"ExclusiveStartShardId": last}


def parents_first(shards: list[ShardInfo]) -> list[ShardInfo]:
    """The shards ordered so that each comes after its parent (when the parent is listed)."""
    listed = {s.shard_id for s in shards}
    placed: set[str] = set()
    ordered: list[ShardInfo] = []
    waiting = list(shards)
    while waiting:
        ready = [s for s in waiting
                 if s.parent_id is None or s.parent_id not in listed or s.parent_id in placed]
        if not ready:  # a cycle cannot happen on DynamoDB; keep what is left as listed
            ready = waiting
        ordered += ready
        placed |= {s.shard_id for s in ready}
        waiting = [s for s in waiting if s.shard_id not in placed]
    return ordered


def may_read(shard: ShardInfo, listed: set[str], read_to_end: set[str]) -> bool:
    """A shard is read once its parent has been read to its end (or is gone: trimmed)."""
    return shard.parent_id is None or shard.parent_id not in listed \
        or shard.parent_id in read_to_end
