"""The stream pump: polls DynamoDB Streams and invokes the stream handlers as Lambda would."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from chalicelib.regions.reachability import RegionHealth
from dmqlocal.checkpoints import Checkpoints, ShardCheckpoint
from dmqlocal.handlers import StreamBinding
from dmqlocal.pump_state import Consumer, Shard, Stream, handler_names, resume_point
from dmqlocal.shards import (
    READ_LIMIT,
    ShardReader,
    describe_shards,
    error_code,
    latest_stream_arn,
    may_read,
)
from dmqlocal.stream_records import Record, to_lambda_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.pump")

__all__ = ["StreamPump", "to_lambda_record"]


class StreamPump:
    """Reads each bound table's stream and hands the records to its handlers.

    As Lambda's event source mapping does: shards are read parents first, a closed
    shard to its end; every handler gets the records in order, in batches of its own
    size. A handler that fails keeps its records and gets them again after a backoff
    (at least once), while the other handlers of the same stream go on; reading pauses
    only when a failing handler holds `MAX_PENDING` records. The last record each
    handler took is checkpointed per shard, so a new pump resumes after it.

    While records come, a pass begins every `interval_s` (back to back while a backlog
    is read). While the streams are quiet, the pause between passes doubles from
    `interval_s` up to `idle_cap_s` (an idle pump makes about one GetRecords per shard per
    cap); the first records, `wake()` (a request reached the server) or `wait_caught_up`
    bring it back to `interval_s` at once.

    `settle_s`: how long the streams must have shown nothing new before the pump counts
    as caught up (`wait_caught_up`). DynamoDB Local writes a change's stream record with
    the change, so 0 there; DynamoDB Streams show a change some time after it was made
    (LocalStack's, under load, seconds to tens of seconds after), so a pass that found
    nothing right after the last write does not show that every change was read.
    """

    MAX_PENDING = 10_000
    SHARDS_REFRESH_S = 60.0  # new shards appear only when one closes: a safety net
    NO_STREAM_RETRY_S = 5.0
    BACKOFF_MIN_S = 0.2
    BACKOFF_MAX_S = 10.0
    IDLE_CAP_S = 1.0  # the longest pause between two passes over quiet streams
    BACKLOG_RECORDS = 500  # a pass handing over this many goes again at once
    FOLLOWING_S = 5.0  # the observer is up to date while a whole read began this recently

    def __init__(
        self, dynamodb: DynamoDBClient, streams: DynamoDBStreamsClient,
        bindings: list[StreamBinding], region: str, interval_s: float = 0.2,
        health: RegionHealth | None = None, checkpoint_dir: Path | str | None = None,
        idle_cap_s: float | None = None,
        observer: Callable[[Sequence[dict[str, Any]]], None] | None = None,
        settle_s: float = 0.0,
    ) -> None:
        self._health = health or RegionHealth()
        self._dynamodb = dynamodb
        self._streams = streams
        self._bindings = bindings
        self._names = handler_names(bindings)
        self._tables: dict[str, list[int]] = {}
        for index, binding in enumerate(bindings):
            self._tables.setdefault(binding.table, []).append(index)
        self._region = region
        self._interval = interval_s
        self._idle_cap = max(interval_s, self.IDLE_CAP_S if idle_cap_s is None else idle_cap_s)
        self._wake = threading.Event()
        self._checkpoints = Checkpoints(checkpoint_dir)
        self._by_table: dict[str, Stream] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self._idle = threading.Condition()
        self._idle_since = float("-inf")
        self._passed_since = float("-inf")  # when the last finished pass began
        self._urgent = threading.Event()  # a caller waits for a pass: no pacing pause
        self._flush = False  # this pass hands over records still in a batching window
        # Sees every record as soon as it is read, before any handler (long polls' wake-ups).
        self._observer = observer
        self._read_since = float("-inf")  # when the last pass that read everything began
        self._behind = False  # this pass left records unread (a full page, a held shard)
        self._settle = settle_s
        self._records_at = float("-inf")  # when a pass last read records

    def start(self) -> None:
        """Poll in a background thread."""
        self._thread = threading.Thread(target=self._run, name=f"dmq-pump-{self._region}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling after the current batch."""
        self._stop.set()
        self._wake.set()
        self._urgent.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def region(self) -> str:
        """The region whose streams it reads."""
        return self._region

    def wake(self) -> None:
        """Poll again now, and at the fast pace until the streams are quiet again. Set
        already, it is left alone (setting takes the event's lock, and every request
        wakes the pump): the pump clears it before the pass it wakes for, so that pass
        comes after this call."""
        if not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        pause = self._interval
        while not self._stop.is_set():
            polled_at = time.monotonic()
            try:
                moved = self.poll_once(flush=False)
            except Exception:
                logger.exception("stream poll failed")
                moved = 0
            if moved:
                pause = self._interval
                # As Lambda polls a shard a few times a second: a pass that found little
                # waits out the interval (records gather for the next one); a backlog is
                # read back to back. A caller waiting for a pass cuts the wait short.
                if moved < self.BACKLOG_RECORDS:
                    self._urgent.wait(max(0.0, polled_at + self._interval - time.monotonic()))
                continue
            if self._wake.wait(pause) or self._retrying():
                self._wake.clear()
                pause = self._interval  # woken, or a handler's retry is due soon
                # Requests wake it often under load: a pass at most every interval, so
                # the store sees the usual pace, not a GetRecords round per request
                # (unless a caller waits for the next pass: `catch_up`).
                if not self._urgent.is_set():
                    self._urgent.wait(max(0.0, polled_at + self._interval - time.monotonic()))
            elif self._holding():
                pause = self._interval  # records wait out a batching window: not idle
            else:
                pause = min(pause * 2, self._idle_cap)

    def poll_once(self, flush: bool = True) -> int:
        """One pass over every shard of every bound stream; return records handled.

        A region marked down has no reachable stream: nothing is read until it is back.
        `flush`: hand over records still inside a handler's batching window (the pump's
        own loop passes False, and lets them wait as Lambda would).
        """
        started = time.monotonic()
        self._flush = flush or self._urgent.is_set() or self._stop.is_set()
        self._urgent.clear()
        try:
            return self._pass(started)
        finally:
            with self._idle:
                self._passed_since = max(self._passed_since, started)
                self._idle.notify_all()

    def _pass(self, started: float) -> int:
        if not self._health.up(self._region):
            self._mark_idle(started)  # nothing can be read: nothing to wait for
            return 0
        moved = 0
        self._behind = False
        for table, indexes in self._tables.items():
            try:
                moved += self._pump_table(table, indexes)
            except ClientError as exc:
                self._behind = True
                self._lost(table, exc)
            except Exception:
                self._behind = True
                logger.exception("reading the stream of %s failed", table)
                self._by_table.pop(table, None)  # start again from the checkpoints
        if not self._behind:
            self._read_since = max(self._read_since, started)
        if not moved and not self._retrying() and not self._holding():
            self._mark_idle(started)
        return moved

    def _holding(self) -> bool:
        """Whether a handler has records waiting out its batching window."""
        return any(c.pending and not c.failing and self._bindings[i].window_s
                   for stream in self._by_table.values()
                   for shard in stream.shards.values()
                   for i, c in shard.consumers.items())

    def _retrying(self) -> bool:
        """Whether a handler holds records it failed on and will be given again: the
        pump is not idle while it waits out that backoff."""
        return any(c.failing and c.pending
                   for stream in self._by_table.values()
                   for shard in stream.shards.values()
                   for c in shard.consumers.values())

    def _lost(self, table: str, exc: ClientError) -> None:
        """Forget the stream's state: the next pass finds the stream again and resumes
        from the checkpoints (what was read and not handed over is read again)."""
        if error_code(exc) == "ResourceNotFoundException":
            logger.info("the stream of %s is gone (%s); finding it again", table, exc)
        else:
            logger.exception("reading the stream of %s failed", table)
        self._by_table.pop(table, None)

    def following(self) -> bool:
        """Whether the observer has seen every record written up to a few seconds ago: a
        pass that began within FOLLOWING_S read every shard of every stream to its end."""
        return time.monotonic() - self._read_since <= self.FOLLOWING_S

    def _pump_table(self, table: str, indexes: list[int]) -> int:
        stream = self._stream(table, indexes)
        if not stream.arn:
            self._behind = True
            return 0
        listed = {s.shard_id for s in stream.order}
        moved = 0
        for info in stream.order:
            shard = stream.shards.get(info.shard_id)
            if shard is not None and may_read(info, listed, stream.done):
                moved += self._pump_shard(stream, shard)
        return moved

    def _stream(self, table: str, indexes: list[int]) -> Stream:
        """The table's stream and its shards, described again only when due."""
        now = time.monotonic()
        stream = self._by_table.get(table)
        if stream is not None and now < stream.refresh_at:
            return stream
        arn = latest_stream_arn(self._streams, table)
        if stream is None or stream.arn != arn:
            stream = Stream(arn, self._checkpoints.load(arn) if arn else {})
            self._by_table[table] = stream
            if arn:
                self._checkpoints.forget_other_streams(arn)
        if not arn:
            stream.refresh_at = now + self.NO_STREAM_RETRY_S
            return stream
        self._discover(stream, indexes)
        stream.refresh_at = now + self.SHARDS_REFRESH_S
        return stream

    def _discover(self, stream: Stream, indexes: list[int]) -> None:
        stream.order = describe_shards(self._streams, stream.arn)
        listed = {s.shard_id for s in stream.order}
        stream.shards = {k: v for k, v in stream.shards.items() if k in listed}
        for info in stream.order:
            if info.shard_id in stream.shards:
                stream.shards[info.shard_id].reader.info = info
                continue
            if info.shard_id in stream.done:
                continue
            saved = stream.saved.get(info.shard_id, ShardCheckpoint())
            if saved.finished:
                stream.done.add(info.shard_id)
                continue
            reader = ShardReader(self._streams, stream.arn, info)
            stream.shards[info.shard_id] = Shard(reader, {
                i: Consumer(saved.handled.get(self._names[i]), saved.handled.get(self._names[i]))
                for i in indexes})

    def _pump_shard(self, stream: Stream, shard: Shard) -> int:
        """Read the shard once (unless a handler holds too much), hand over, checkpoint."""
        reader, shard_id = shard.reader, shard.reader.info.shard_id
        held = max(len(c.pending) for c in shard.consumers.values()) >= self.MAX_PENDING
        self._behind = self._behind or (held and not reader.at_end)
        if not reader.at_end and not held:
            records = reader.read(resume_point(shard))
            self._behind = self._behind or len(records) >= READ_LIMIT
            self._queue(stream.arn, shard, records)
            if reader.at_end:
                stream.done.add(shard_id)
                stream.refresh_at = 0.0  # its children are next
        # A handler takes a child's records once it has taken all of the parent's.
        parent = stream.shards.get(reader.info.parent_id or "")
        now = time.monotonic()
        before = [c.handled for c in shard.consumers.values()]
        moved = sum(self._hand_over(self._bindings[i], c, now)
                    for i, c in shard.consumers.items()
                    if parent is None or not parent.consumers[i].pending)
        finished = reader.at_end and not any(c.pending for c in shard.consumers.values())
        if finished:
            del stream.shards[shard_id]
        if finished or before != [c.handled for c in shard.consumers.values()]:
            self._checkpoints.save(stream.arn, shard_id, ShardCheckpoint(
                {self._names[i]: c.handled for i, c in shard.consumers.items() if c.handled},
                finished))
        return moved

    def _queue(self, arn: str, shard: Shard, records: list[Record]) -> None:
        """Give each handler the records it has not had yet, in order."""
        self.delivered += len(records)
        if records:
            self._records_at = time.monotonic()
        converted = [to_lambda_record(r, arn, self._region) for r in records]
        if self._observer is not None and converted:
            try:
                self._observer(converted)
            except Exception:
                logger.warning("the stream's observer failed", exc_info=True)
        for consumer in shard.consumers.values():
            consumer.take(converted)

    def _hand_over(self, binding: StreamBinding, consumer: Consumer, now: float) -> int:
        """Give a handler its pending records in batches; keep what it fails on."""
        return consumer.hand_over(binding, now, self._flush, self._region,
                                  (self.BACKOFF_MIN_S, self.BACKOFF_MAX_S))

    def _mark_idle(self, started: float) -> None:
        with self._idle:
            self._idle_since = max(self._idle_since, started)
            self._idle.notify_all()

    def catch_up(self, timeout_s: float, written_at: float = float("inf")) -> bool:
        """Wait until a whole pass that began after this call has finished: the records
        written before the call (up to one read per shard) have been handed over. The
        pass runs at once, not at the pump's pace. False after `timeout_s`.

        `written_at` (time.monotonic()): this process's last write to the store. When a
        pass that began after it, and within the idle pace (`idle_cap_s`), found the
        streams read to their end and nothing to hand over or hold, there is nothing of
        this process's to wait for: no pass is made (writes of other processes sharing the
        store are then seen at the pump's own pace, as a long poll sees them)."""
        since = time.monotonic()
        with self._idle:
            idle_since = self._idle_since
        if written_at <= idle_since and since - idle_since <= self._idle_cap:
            return True
        deadline = since + timeout_s
        self._urgent.set()
        self.wake()
        with self._idle:
            while self._passed_since < since:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.5))
        return True

    def wait_caught_up(self, since: float, timeout_s: float) -> bool:
        """Wait until a whole pass that began after `since` (time.monotonic()), and at
        least `settle_s` after the last records were read, handled nothing and left no
        handler waiting to retry a batch it failed on: every change made before `since`
        (and shown by the stream within `settle_s`) has reached every handler (one that
        waits for a down region, such as replication, does not count). False if that
        takes longer than `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._idle_since <= (needed := self._settled_after(since)):
                now = time.monotonic()
                if now >= needed:
                    self._urgent.set()  # records in a batching window are handed over now
                    self.wake()  # no need to wait out an idle pause
                remaining = deadline - now
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.5, needed - now if needed > now else 0.5))
        return True

    def _settled_after(self, since: float) -> float:
        """When a pass must begin to show that the stream is read up to `since`."""
        if self._settle <= 0:
            return since
        return max(since, self._records_at) + self._settle

