"""The stream pump: polls DynamoDB Streams and invokes the stream handlers as Lambda would."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chalicelib.regions import RegionDownError, RegionHealth
from dmqlocal.handlers import StreamBinding

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient

logger = logging.getLogger("dmq.pump")


class _Lambda:
    """The smallest Lambda context the handlers may read."""

    function_name = "dmq-local-stream"
    aws_request_id = ""

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def to_lambda_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A GetRecords record in the shape Lambda delivers it."""
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {
        **record,
        "dynamodb": dynamodb,
        "awsRegion": record.get("awsRegion", region),
        "eventSourceARN": stream_arn,
    }


@dataclass
class _ShardState:
    """Where the pump reads a stream shard, and what each handler has yet to take."""

    iterator: str | None = None
    pending: dict[int, list[dict[str, Any]]] = field(default_factory=dict)


class StreamPump:
    """Polls each bound table's stream shards and hands batches to the handlers.

    Each stream shard is read once per pass; every handler bound to the table gets the
    records in order, in batches of its own size. A handler that fails keeps its
    records and gets them again on the next pass (at least once, as on Lambda), while
    the other handlers of the same stream go on; reading pauses only when a failing
    handler holds `MAX_PENDING` records.
    """

    MAX_PENDING = 10_000
    SHARDS_REFRESH_S = 2.0

    def __init__(
        self, dynamodb: DynamoDBClient, streams: DynamoDBStreamsClient,
        bindings: list[StreamBinding], region: str, interval_s: float = 0.2,
        health: RegionHealth | None = None,
    ) -> None:
        self._health = health or RegionHealth()
        self._dynamodb = dynamodb
        self._streams = streams
        self._bindings = bindings
        self._tables: dict[str, list[int]] = {}
        for index, binding in enumerate(bindings):
            self._tables.setdefault(binding.table, []).append(index)
        self._region = region
        self._interval = interval_s
        self._arns: dict[str, str] = {}
        self._shard_ids: dict[str, tuple[float, list[str]]] = {}
        self._shards: dict[tuple[str, str], _ShardState] = {}
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
                arn = self._stream_arn(table)
                for shard_id in self._shard_list(arn) if arn else []:
                    moved += self._pump_shard(arn, shard_id, indexes)
            except Exception:
                logger.exception("reading the stream of %s failed", table)
                self._arns.pop(table, None)
        if not moved:
            self._mark_idle(started)
        return moved

    def _stream_arn(self, table: str) -> str:
        if table not in self._arns:
            arn = self._dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
            if not arn:
                return ""
            self._arns[table] = arn
        return self._arns[table]

    def _shard_list(self, arn: str) -> list[str]:
        fetched, ids = self._shard_ids.get(arn, (float("-inf"), []))
        if time.monotonic() - fetched > self.SHARDS_REFRESH_S:
            shards = self._streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
            ids = [shard["ShardId"] for shard in shards]
            self._shard_ids[arn] = (time.monotonic(), ids)
        return ids

    def _pump_shard(self, arn: str, shard_id: str, indexes: list[int]) -> int:
        state = self._shards.setdefault((arn, shard_id), _ShardState(
            pending={i: [] for i in indexes}))
        if max(len(p) for p in state.pending.values()) < self.MAX_PENDING:
            if state.iterator is None:
                state.iterator = self._streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            limit = max(self._bindings[i].batch_size for i in indexes)
            result = self._streams.get_records(ShardIterator=state.iterator, Limit=limit)
            records = [to_lambda_record(dict(r), arn, self._region)
                       for r in result.get("Records", [])]
            for pending in state.pending.values():
                pending.extend(records)
            self.delivered += len(records)
            state.iterator = result.get("NextShardIterator") or state.iterator
        return sum(self._hand_over(self._bindings[i], state.pending[i]) for i in indexes)

    def _hand_over(self, binding: StreamBinding, pending: list[dict[str, Any]]) -> int:
        """Give a handler its pending records in batches; keep what it fails on."""
        handled = 0
        while pending:
            batch = pending[:binding.batch_size]
            try:
                binding.handler({"Records": batch}, _Lambda())
            except RegionDownError as exc:
                logger.debug("stream records of %s wait: %s", self._region, exc)
                break
            except Exception:
                logger.exception("stream handler %s failed; its batch is retried",
                                 getattr(binding.handler, "__name__", binding.table))
                break
            del pending[:len(batch)]
            handled += len(batch)
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
