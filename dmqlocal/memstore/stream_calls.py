"""The DynamoDB Streams calls: ListStreams, DescribeStream, GetShardIterator, GetRecords."""

from __future__ import annotations

from typing import Any

from dmqlocal.memstore.database import Database
from dmqlocal.memstore.errors import invalid
from dmqlocal.memstore.streams import parse_iterator

Request = dict[str, Any]
Answer = dict[str, Any]


def list_streams(db: Database, request: Request) -> Answer:
    """ListStreams, oldest first, optionally of one table."""
    table = request.get("TableName")
    limit = int(request.get("Limit") or 100)
    start = request.get("ExclusiveStartStreamArn")
    found = sorted((s for s in db.streams.values() if table is None or s.table == table),
                   key=lambda s: (s.created, s.arn))
    if start is not None:
        arns = [s.arn for s in found]
        found = found[arns.index(start) + 1:] if start in arns else found
    answer: Answer = {"Streams": [{"StreamArn": s.arn, "TableName": s.table,
                                   "StreamLabel": s.label} for s in found[:limit]]}
    if len(found) > limit:
        answer["LastEvaluatedStreamArn"] = found[limit - 1].arn
    return answer


def describe_stream(db: Database, request: Request) -> Answer:
    """DescribeStream: one shard per stream."""
    return {"StreamDescription": db.stream(request.get("StreamArn")).description()}


def get_shard_iterator(db: Database, request: Request) -> Answer:
    """GetShardIterator."""
    stream = db.stream(request.get("StreamArn"))
    return {"ShardIterator": stream.iterator(str(request.get("ShardId")),
                                             str(request.get("ShardIteratorType")),
                                             request.get("SequenceNumber"))}


def get_records(db: Database, request: Request) -> Answer:
    """GetRecords: up to Limit (1 to 1000) records from the iterator's position."""
    limit = int(request.get("Limit") or 1000)
    if not 1 <= limit <= 1000:
        raise invalid("1 validation error detected: Value at 'limit' failed to satisfy "
                      "constraint: Member must have value less than or equal to 1000")
    arn, _shard, position, issued = parse_iterator(str(request.get("ShardIterator")))
    return db.stream(arn).read(position, issued, limit)


CALLS = {"ListStreams": list_streams, "DescribeStream": describe_stream,
         "GetShardIterator": get_shard_iterator, "GetRecords": get_records}
