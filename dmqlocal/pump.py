"""The stream pump: polls DynamoDB Streams and invokes the stream handlers as Lambda would."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from chalicelib.regions import RegionDownError, RegionHealth
from dmqlocal.checkpoints import Checkpoints, ShardCheckpoint
from dmqlocal.handlers import StreamBinding
from dmqlocal.shards import ShardInfo, describe_shards, may_read

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.pump")

Record = dict[str, Any]


class _Lambda:
    """The smallest Lambda context the handlers may read."""

    function_name = "dmq-local-stream"
    aws_request_id = ""

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def source_arn(stream_arn: str, region: str) -> str:
    """The stream ARN as Lambda names it: DynamoDB Local writes `ddblocal` as the region."""
    parts = stream_arn.split(":")
    if len(parts) > 5:
        parts[3] = region
    return ":".join(parts)


def to_lambda_record(record: Record, stream_arn: str, region: str) -> Record:
    """A GetRecords record in the shape Lambda delivers it."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": dynamodb, "awsRegion": region,
            "eventSourceARN": source_arn(stream_arn, region)}


def _seq(record: Record) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@dataclass
class _Consumer:
    """One handler's view of one shard: what it took, and what it has yet to take."""

    handled: str | None  # the checkpoint: the last record it took without failing
    queued: str | None  # the last record put in `pending`
    pending: list[Record] = field(default_factory=list)
    retry_at: float = 0.0
    delay_s: float = 0.0


@dataclass
class _Shard:
    info: ShardInfo
    consumers: dict[int, _Consumer]
    iterator: str | None = None
    read_to: str | None = None  # the last record read from the stream
    at_end: bool = False  # GetRecords gave no next iterator: closed and read to its end
    trimmed_after: str | None = None


@dataclass
class _Stream:
    arn: str
    saved: dict[str, ShardCheckpoint]
    refresh_at: float = 0.0
    order: list[ShardInfo] = field(default_factory=list)
    shards: dict[str, _Shard] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # shards read to their end


class StreamPump:
    """Reads each bound table's stream and hands the records to its handlers.

    As Lambda's event source mapping does: shards are read parents first, a closed
    shard to its end; every handler gets the records in order, in batches of its own
    size. A handler that fails keeps its records and gets them again after a backoff
    (at least once), while the other handlers of the same stream go on; reading pauses
    only when a failing handler holds `MAX_PENDING` records. The last record each
    handler took is checkpointed per shard, so a new pump resumes after it.
    """

    MAX_PENDING = 10_000
    READ_LIMIT = 1000  # GetRecords' maximum
    SHARDS_REFRESH_S = 60.0  # new shards appear only when one closes: a safety net
    NO_STREAM_RETRY_S = 5.0
    BACKOFF_MIN_S = 0.2
    BACKOFF_MAX_S = 10.0

    def __init__(
        self, dynamodb: DynamoDBClient, streams: DynamoDBStreamsClient,
        bindings: list[StreamBinding], region: str, interval_s: float = 0.2,
        health: RegionHealth | None = None, checkpoint_dir: Path | str | None = None,
    ) -> None:
        self._health = health or RegionHealth()
        self._dynamodb = dynamodb
        self._streams = streams
        self._bindings = bindings
        self._names = _handler_names(bindings)
        self._tables: dict[str, list[int]] = {}
        for index, binding in enumerate(bindings):
            self._tables.setdefault(binding.table, []).append(index)
        self._region = region
        self._interval = interval_s
        self._checkpoints = Checkpoints(checkpoint_dir)
        self._by_table: dict[str, _Stream] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self._idle = threading.Condition()
        self._idle_since = float("-inf")

    def start(self) -> None:
        """Poll in a background thread."""
        self._thread = threading.Thread(target=self._run, name=f"dmq-pump-{self._region}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling after the current batch."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                moved = self.poll_once()
            except Exception:
                logger.exception("stream poll failed")
                moved = 0
            if not moved:
                self._stop.wait(self._interval)

    def poll_once(self) -> int:
        """One pass over every shard of every bound stream; return records handled.

        A region marked down has no reachable stream: nothing is read until it is back.
        """
        started = time.monotonic()
        if not self._health.up(self._region):
            self._mark_idle(started)  # nothing can be read: nothing to wait for
            return 0
        moved = 0
        for table, indexes in self._tables.items():
            try:
                moved += self._pump_table(table, indexes)
            except ClientError as exc:
                self._lost(table, exc)
            except Exception:
                logger.exception("reading the stream of %s failed", table)
                self._by_table.pop(table, None)  # start again from the checkpoints
        if not moved:
            self._mark_idle(started)
        return moved

    def _lost(self, table: str, exc: ClientError) -> None:
        """Forget the stream's state: the next pass finds the stream again and resumes
        from the checkpoints (what was read and not handed over is read again)."""
        if _code(exc) == "ResourceNotFoundException":
            logger.info("the stream of %s is gone (%s); finding it again", table, exc)
        else:
            logger.exception("reading the stream of %s failed", table)
        self._by_table.pop(table, None)

    def _pump_table(self, table: str, indexes: list[int]) -> int:
        stream = self._stream(table, indexes)
        if not stream.arn:
            return 0
        listed = {s.shard_id for s in stream.order}
        moved = 0
        for info in stream.order:
            shard = stream.shards.get(info.shard_id)
            if shard is not None and may_read(info, listed, stream.done):
                moved += self._pump_shard(stream, shard)
        return moved

    def _stream(self, table: str, indexes: list[int]) -> _Stream:
        """The table's stream and its shards, described again only when due."""
        now = time.monotonic()
        stream = self._by_table.get(table)
        if stream is not None and now < stream.refresh_at:
            return stream
        arn = str(self._dynamodb.describe_table(TableName=table)["Table"]
                  .get("LatestStreamArn", ""))
        if stream is None or stream.arn != arn:
            stream = _Stream(arn, self._checkpoints.load(arn) if arn else {})
            self._by_table[table] = stream
            if arn:
                self._checkpoints.forget_other_streams(arn)
        if not arn:
            stream.refresh_at = now + self.NO_STREAM_RETRY_S
            return stream
        self._discover(stream, indexes)
        stream.refresh_at = now + self.SHARDS_REFRESH_S
        return stream

    def _discover(self, stream: _Stream, indexes: list[int]) -> None:
        stream.order = describe_shards(self._streams, stream.arn)
        listed = {s.shard_id for s in stream.order}
        stream.shards = {k: v for k, v in stream.shards.items() if k in listed}
        for info in stream.order:
            if info.shard_id in stream.shards:
                stream.shards[info.shard_id].info = info
                continue
            if info.shard_id in stream.done:
                continue
            saved = stream.saved.get(info.shard_id, ShardCheckpoint())
            if saved.finished:
                stream.done.add(info.shard_id)
                continue
            stream.shards[info.shard_id] = _Shard(info, {
                i: _Consumer(saved.handled.get(self._names[i]), saved.handled.get(self._names[i]))
                for i in indexes})

    def _pump_shard(self, stream: _Stream, shard: _Shard) -> int:
        if not shard.at_end and max(len(c.pending) for c in shard.consumers.values()) \
                < self.MAX_PENDING:
            self._queue(stream.arn, shard, self._read(stream.arn, shard))
            if shard.at_end:
                stream.done.add(shard.info.shard_id)
                stream.refresh_at = 0.0  # its children are next
        parent = stream.shards.get(shard.info.parent_id or "")
        now = time.monotonic()
        before = [c.handled for c in shard.consumers.values()]
        moved = sum(self._hand_over(self._bindings[i], c, now)
                    for i, c in shard.consumers.items()
                    if parent is None or not parent.consumers[i].pending)
        finished = shard.at_end and not any(c.pending for c in shard.consumers.values())
        if finished:
            del stream.shards[shard.info.shard_id]
        if finished or before != [c.handled for c in shard.consumers.values()]:
            self._checkpoints.save(stream.arn, shard.info.shard_id, ShardCheckpoint(
                {self._names[i]: c.handled for i, c in shard.consumers.items() if c.handled},
                finished))
        return moved

    def _read(self, arn: str, shard: _Shard) -> list[Record]:
        """One GetRecords, recovering once from an expired iterator or trimmed data."""
        if shard.iterator is None:
            shard.iterator = self._iterator(arn, shard)
        try:
            result = self._streams.get_records(ShardIterator=shard.iterator,
                                               Limit=self.READ_LIMIT)
        except ClientError as exc:
            code = _code(exc)
            if code == "ExpiredIteratorException":
                logger.info("shard %s: iterator expired; resuming after %s",
                            shard.info.shard_id, shard.read_to or "the checkpoint")
            elif code == "TrimmedDataAccessException":
                self._trimmed(shard)
            else:
                raise
            shard.iterator = self._iterator(arn, shard)
            result = self._streams.get_records(ShardIterator=shard.iterator,
                                               Limit=self.READ_LIMIT)
        records = [cast(Record, dict(r)) for r in result.get("Records", [])]
        if records:
            shard.read_to = records[-1]["dynamodb"]["SequenceNumber"]
            if shard.trimmed_after is not None:
                logger.warning("shard %s: records after %s and before %s were trimmed "
                               "before they were read", shard.info.shard_id,
                               shard.trimmed_after, shard.read_to)
                shard.trimmed_after = None
        shard.iterator = result.get("NextShardIterator")
        shard.at_end = shard.iterator is None
        return records

    def _trimmed(self, shard: _Shard) -> None:
        """Restart the shard at its oldest record; replays are filtered out later."""
        after = shard.read_to or _resume_point(shard)
        if after is None:
            # DynamoDB Local says this of a horizon iterator taken while the shard was
            # empty, once records arrive: nothing was skipped.
            logger.debug("shard %s: trimmed at the horizon; reading it again",
                         shard.info.shard_id)
        else:
            logger.warning("shard %s: records after %s were trimmed; resuming at the "
                           "oldest record left", shard.info.shard_id, after)
        shard.trimmed_after = after
        shard.read_to = None
        shard.iterator = None
        shard.at_end = False

    def _iterator(self, arn: str, shard: _Shard) -> str:
        """After the last record read (or the checkpoint), else at the shard's horizon
        (also once that position was trimmed, until a record is read)."""
        after = shard.read_to or _resume_point(shard)
        if after is not None and shard.trimmed_after is None:
            try:
                return self._streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard.info.shard_id,
                    ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=after,
                )["ShardIterator"]
            except ClientError as exc:
                if _code(exc) != "TrimmedDataAccessException":
                    raise
                self._trimmed(shard)
        return self._streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard.info.shard_id, ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]

    def _queue(self, arn: str, shard: _Shard, records: list[Record]) -> None:
        """Give each handler the records it has not had yet, in order."""
        self.delivered += len(records)
        converted = [to_lambda_record(r, arn, self._region) for r in records]
        for consumer in shard.consumers.values():
            after = int(consumer.queued) if consumer.queued is not None else -1
            fresh = [r for r in converted if _seq(r) > after]
            if fresh:
                consumer.pending.extend(fresh)
                consumer.queued = fresh[-1]["dynamodb"]["SequenceNumber"]

    def _hand_over(self, binding: StreamBinding, consumer: _Consumer, now: float) -> int:
        """Give a handler its pending records in batches; keep what it fails on."""
        if now < consumer.retry_at:
            return 0
        handled = 0
        pending = consumer.pending
        while pending:
            batch = pending[:binding.batch_size]
            try:
                binding.handler({"Records": batch}, _Lambda())
            except RegionDownError as exc:
                logger.debug("stream records of %s wait: %s", self._region, exc)
                break  # no backoff: the region's health is known in process
            except Exception:
                consumer.delay_s = min(max(consumer.delay_s * 2, self.BACKOFF_MIN_S),
                                       self.BACKOFF_MAX_S)
                consumer.retry_at = now + consumer.delay_s
                logger.exception("stream handler %s failed; its batch is retried in %.1f s",
                                 getattr(binding.handler, "__name__", binding.table),
                                 consumer.delay_s)
                break
            del pending[:len(batch)]
            handled += len(batch)
            consumer.handled = batch[-1]["dynamodb"]["SequenceNumber"]
            consumer.delay_s = 0.0
        return handled

    def _mark_idle(self, started: float) -> None:
        with self._idle:
            self._idle_since = max(self._idle_since, started)
            self._idle.notify_all()

    def wait_caught_up(self, since: float, timeout_s: float) -> bool:
        """Wait until a whole pass that began after `since` (time.monotonic()) handled
        nothing: every change made before `since` has reached every handler that works
        (one that keeps failing, such as replication to a down region, waits for its
        region and does not count). False if that takes longer than `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._idle_since <= since:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.5))
        return True


def _resume_point(shard: _Shard) -> str | None:
    """The lowest checkpoint of the shard's handlers; None if one has none (horizon)."""
    handled = [c.handled for c in shard.consumers.values()]
    if not handled or any(h is None for h in handled):
        return None
    return min((h for h in handled if h is not None), key=int)


def _handler_names(bindings: list[StreamBinding]) -> list[str]:
    """A name per binding, stable across restarts and unique within its table."""
    names: list[str] = []
    for binding in bindings:
        name = str(getattr(binding.handler, "__name__", "handler"))
        taken = sum(1 for b, n in zip(bindings, names, strict=False)
                    if b.table == binding.table and n.split("#")[0] == name)
        names.append(f"{name}#{taken}" if taken else name)
    return names
