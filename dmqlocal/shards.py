"""A stream's shards and their lineage, as DescribeStream tells them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from dmqlocal.stream_records import Record, sequence_number

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.pump")
READ_LIMIT = 1000  # GetRecords' maximum


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


def latest_stream_arn(streams: DynamoDBStreamsClient, table: str) -> str:
    """The table's current stream ARN ("" when it has none), from ListStreams.

    Not DescribeTable: DynamoDB Local answers that with the table's and each index's
    item count and size, summed over every item (SQLite `SELECT SUM(itemSize)`), so one
    DescribeTable of a messages table holding a million messages kept the store busy for
    seconds, every other request waiting behind it. ListStreams reads the stream list
    alone. A table made again keeps its old streams listed for a while: the newest label
    is the current one (labels are creation times)."""
    found: list[tuple[str, str]] = []
    start: dict[str, Any] = {}
    while True:
        page = streams.list_streams(TableName=table, **start)
        found += [(str(s.get("StreamLabel", "")), str(s["StreamArn"]))
                  for s in page.get("Streams", []) if s.get("TableName", table) == table]
        last = page.get("LastEvaluatedStreamArn")
        if not last:
            return max(found)[1] if found else ""
        start = {"ExclusiveStartStreamArn": last}


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


def error_code(exc: ClientError) -> str:
    """The AWS error code of a failed call."""
    return str(exc.response.get("Error", {}).get("Code", ""))


class ShardReader:
    """Reads one shard in order, recovering from expired iterators and trimmed data.

    `read(resume_after)` gives the next records; `resume_after` is where a new iterator
    starts when none was read yet (the lowest checkpoint of the shard's handlers, or None
    for the shard's horizon).
    """

    def __init__(self, streams: DynamoDBStreamsClient, stream_arn: str, info: ShardInfo) -> None:
        self._streams = streams
        self._arn = stream_arn
        self.info = info
        self._iterator: str | None = None
        self._read_to: str | None = None  # the last record read
        self._trimmed_after: str | None = None  # set: read from the horizon again
        self.at_end = False  # GetRecords gave no next iterator: closed and read to its end

    def read(self, resume_after: str | None) -> list[Record]:
        """One GetRecords of up to 1000 records (after one recovery, if needed)."""
        if self._iterator is None:
            self._iterator = self._new_iterator(resume_after)
        try:
            result = self._streams.get_records(ShardIterator=self._iterator, Limit=READ_LIMIT)
        except ClientError as exc:
            code = error_code(exc)
            if code == "ExpiredIteratorException":
                logger.info("shard %s: iterator expired; resuming after %s",
                            self.info.shard_id, self._read_to or resume_after or "the horizon")
            elif code == "TrimmedDataAccessException":
                self._trimmed(resume_after)
            else:
                raise
            self._iterator = self._new_iterator(resume_after)
            result = self._streams.get_records(ShardIterator=self._iterator, Limit=READ_LIMIT)
        records = [cast(Record, dict(r)) for r in result.get("Records", [])]
        if records:
            self._read_to = sequence_number(records[-1])
            if self._trimmed_after is not None:
                logger.warning("shard %s: records after %s and before %s were trimmed "
                               "before they were read", self.info.shard_id,
                               self._trimmed_after, self._read_to)
                self._trimmed_after = None
        self._iterator = result.get("NextShardIterator")
        self.at_end = self._iterator is None
        return records

    def _trimmed(self, resume_after: str | None) -> None:
        """Restart at the shard's oldest record; the pump filters out what it handled."""
        after = self._read_to or resume_after
        if after is None:
            # DynamoDB Local says this of a horizon iterator taken while the shard was
            # empty, once records arrive after writes to other tables: nothing is skipped.
            logger.debug("shard %s: trimmed at the horizon; reading it again",
                         self.info.shard_id)
        else:
            logger.warning("shard %s: records after %s were trimmed; resuming at the "
                           "oldest record left", self.info.shard_id, after)
        self._trimmed_after = after
        self._read_to = None

    def _new_iterator(self, resume_after: str | None) -> str:
        """After the last record read (or `resume_after`), else at the shard's horizon;
        at the horizon too once that position was trimmed, until a record is read."""
        after = self._read_to or resume_after
        if after is not None and self._trimmed_after is None:
            try:
                return self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=self.info.shard_id,
                    ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after,
                )["ShardIterator"]
            except ClientError as exc:
                if error_code(exc) != "TrimmedDataAccessException":
                    raise
                self._trimmed(resume_after)
        return self._streams.get_shard_iterator(
            StreamArn=self._arn, ShardId=self.info.shard_id, ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
