"""DynamoDB Streams in memory: one shard per stream, records kept for 24 hours (at most
`MAX_RECORDS` of them), iterators that expire after 15 minutes."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dmqlocal.memstore.errors import StoreError, invalid, not_found
from dmqlocal.memstore.values import Item, item_size

RETENTION_S = 24 * 3600
ITERATOR_LIFE_S = 15 * 60
# A stream keeps at most this many records; older ones are trimmed as DynamoDB trims
# records older than 24 hours. DMQ's pump reads within seconds, so this bounds the
# store's memory under a sustained load without changing what DMQ sees.
MAX_RECORDS = 100_000
FIRST_SEQUENCE = 10**20  # 21 digits: sequence numbers compare alike as text and as numbers
SERVICE_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _label(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


@dataclass
class Stream:
    """One table's stream: its records (absolute positions from `base`) and status."""

    arn: str
    label: str
    table: str
    region: str
    key_schema: list[dict[str, str]]
    view: str
    created: float
    shard_id: str
    records: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    base: int = 0  # the position of records[0]
    closed_at: float | None = None

    @classmethod
    def new(cls, table_arn: str, table: str, region: str, key_schema: list[dict[str, str]],
            view: str) -> Stream:
        """A stream made now for the table."""
        now = time.time()
        label = _label(now)
        shard = f"shardId-{int(now * 1000):020d}-{os.urandom(4).hex()}"
        return cls(f"{table_arn}/stream/{label}", label, table, region, key_schema, view,
                   now, shard)

    @property
    def end(self) -> int:
        """The position after the newest record."""
        return self.base + len(self.records)

    def append(self, name: str, keys: Item, old: Item | None, new: Item | None,
               by_service: bool = False) -> None:
        """Record a change (INSERT, MODIFY or REMOVE) as the stream's view type keeps it."""
        if self.closed_at is not None:
            return
        now = time.time()
        data: dict[str, Any] = {"ApproximateCreationDateTime": int(now), "Keys": keys,
                                "SequenceNumber": str(FIRST_SEQUENCE + self.end),
                                "StreamViewType": self.view}
        size = item_size(keys)
        if new is not None and self.view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            data["NewImage"] = new
            size += item_size(new)
        if old is not None and self.view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            data["OldImage"] = old
            size += item_size(old)
        data["SizeBytes"] = size
        record: dict[str, Any] = {"eventID": os.urandom(16).hex(), "eventName": name,
                                  "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                                  "awsRegion": self.region, "dynamodb": data}
        if by_service:
            record["userIdentity"] = SERVICE_IDENTITY
        self.records.append(record)
        self.times.append(now)
        if len(self.records) > MAX_RECORDS + MAX_RECORDS // 10 or (
                len(self.records) % 1000 == 0 and self.times[0] < now - RETENTION_S):
            self.trim(now)

    def trim(self, now: float) -> None:
        """Drop records past the retention or beyond the cap, oldest first."""
        drop = max(0, len(self.records) - MAX_RECORDS)
        while drop < len(self.times) and self.times[drop] < now - RETENTION_S:
            drop += 1
        if drop:
            del self.records[:drop]
            del self.times[:drop]
            self.base += drop

    def close(self) -> None:
        """The table was deleted or its stream turned off: no more records."""
        if self.closed_at is None:
            self.closed_at = time.time()

    def expired(self, now: float) -> bool:
        """A closed stream is forgotten 24 hours after it closed."""
        return self.closed_at is not None and self.closed_at < now - RETENTION_S

    def description(self) -> dict[str, Any]:
        """DescribeStream's StreamDescription."""
        sequence = {"StartingSequenceNumber": str(FIRST_SEQUENCE + self.base)}
        if self.closed_at is not None:
            sequence["EndingSequenceNumber"] = str(FIRST_SEQUENCE + max(self.end - 1,
                                                                       self.base))
        return {"StreamArn": self.arn, "StreamLabel": self.label,
                "StreamStatus": "DISABLED" if self.closed_at is not None else "ENABLED",
                "StreamViewType": self.view, "CreationRequestDateTime": self.created,
                "TableName": self.table, "KeySchema": self.key_schema,
                "Shards": [{"ShardId": self.shard_id, "SequenceNumberRange": sequence}]}

    def iterator(self, shard_id: str, kind: str, sequence: str | None) -> str:
        """GetShardIterator."""
        if shard_id != self.shard_id:
            raise not_found(f"Shard {shard_id} not found in stream {self.arn}")
        if kind == "TRIM_HORIZON":
            position = self.base
        elif kind == "LATEST":
            position = self.end
        elif kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            position = self._position(sequence) + (kind == "AFTER_SEQUENCE_NUMBER")
        else:
            raise invalid(f"Invalid ShardIteratorType: {kind}")
        return f"{self.arn}|{self.shard_id}|{position}|{int(time.time() * 1000)}"

    def _position(self, sequence: str | None) -> int:
        try:
            position = int(sequence or "") - FIRST_SEQUENCE
        except ValueError:
            raise invalid(f"Invalid SequenceNumber: {sequence}") from None
        if position < self.base:
            raise StoreError("TrimmedDataAccessException",
                             "The operation attempted to read past the oldest stream record "
                             "in a shard, or the sequence number was not found")
        if position >= self.end:
            raise invalid(f"Invalid SequenceNumber {sequence}: it is beyond the shard's end")
        return position

    def read(self, position: int, issued_ms: int, limit: int) -> dict[str, Any]:
        """GetRecords from `position`."""
        if issued_ms < (time.time() - ITERATOR_LIFE_S) * 1000:
            raise StoreError("ExpiredIteratorException",
                             "Iterator expired. The iterator was created over 15 minutes ago.")
        if position < self.base:
            raise StoreError("TrimmedDataAccessException",
                             "The operation attempted to read past the oldest stream record "
                             "in a shard")
        start = position - self.base
        records = self.records[start:start + limit]
        after = position + len(records)
        answer: dict[str, Any] = {"Records": records}
        if self.closed_at is None or after < self.end:
            answer["NextShardIterator"] = (f"{self.arn}|{self.shard_id}|{after}|"
                                           f"{int(time.time() * 1000)}")
        return answer


def parse_iterator(text: str) -> tuple[str, str, int, int]:
    """A shard iterator's stream ARN, shard, position and issue time (ms)."""
    try:
        arn, shard, position, issued = text.rsplit("|", 3)
        return arn, shard, int(position), int(issued)
    except ValueError:
        raise invalid("Invalid ShardIterator") from None
