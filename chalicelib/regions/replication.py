"""Cross-region replication: the home region's stream records are applied to the replicas.

The stream handlers of the messages and queues tables call `Replicator.on_records`. A
record is replicated only from the queue's home region (a replica never writes back),
to every replica region of the queue. Async mode is this path alone; a queue in sync
mode also has its sends written to the replicas before they are acknowledged (see
`SyncReplicas`); the stream path runs for it too, and catches up a replica whose
synchronous write failed. Replication lag (stream record time to apply time) is kept per
region and emitted as the CloudWatch metric ReplicationLagMs (see `chalicelib.observability`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib import observability
from chalicelib.clock import Clock
from chalicelib.domain.exceptions import StoreError
from chalicelib.domain.messages import Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.regions.backends import BackendOf
from chalicelib.regions.reachability import RegionHealth
from chalicelib.regions.replica import ReplicaApplier

logger = logging.getLogger("dmq.replication")
LAG_WINDOW = 10_000


def stream_origin(record: Mapping[str, Any]) -> tuple[str, str]:
    """(region, table) of a Lambda stream record, from its event source ARN."""
    arn = str(record.get("eventSourceARN", ""))
    parts = arn.split(":")
    region = parts[3] if len(parts) > 5 else str(record.get("awsRegion", ""))
    table = arn.split(":table/", 1)[1].split("/", 1)[0] if ":table/" in arn else ""
    return region, table


def queue_id_of_key(keys: Mapping[str, Any]) -> str:
    """The queue a changed item belongs to: a queue record, or a message of a shard."""
    if "queue_id" in keys:
        return str(keys["queue_id"]["S"])
    return str(keys["pk"]["S"]).rsplit("#", 1)[0]


def queue_lags(records: Sequence[Mapping[str, Any]], now_ms: int) -> dict[str, int]:
    """The largest lag of each queue's messages in a batch: now less the change's
    ApproximateCreationDateTime (queue records and undated changes are left out)."""
    lags: dict[str, int] = {}
    for record in records:
        data = record.get("dynamodb", {})
        created = data.get("ApproximateCreationDateTime")
        keys = data.get("Keys") or {}
        if created is None or "pk" not in keys:
            continue
        queue_id = queue_id_of_key(keys)
        lag = max(0, now_ms - round(float(created) * 1000))
        lags[queue_id] = max(lag, lags.get(queue_id, 0))
    return lags


class LagMetrics:
    """The most recent replication lags of each target region, and how many synchronous
    replica writes failed per region (the stream path caught those messages up)."""

    def __init__(self) -> None:
        self._lags: dict[str, deque[int]] = {}
        self._sync_faults: dict[str, int] = {}
        self._lock = threading.Lock()

    def add_sync_faults(self, region: str, count: int) -> None:
        """Count messages whose synchronous write to a replica region failed."""
        with self._lock:
            self._sync_faults[region] = self._sync_faults.get(region, 0) + count

    def sync_faults(self) -> dict[str, int]:
        """Failed synchronous replica writes (messages) per replica region."""
        with self._lock:
            return dict(self._sync_faults)

    def add(self, region: str, lags_ms: Sequence[int]) -> None:
        """Record lags of changes applied to a region."""
        with self._lock:
            self._lags.setdefault(region, deque(maxlen=LAG_WINDOW)).extend(lags_ms)

    def summary(self) -> dict[str, dict[str, float]]:
        """p50, p99 and count of the recorded lags per target region."""
        with self._lock:
            copies = {r: sorted(v) for r, v in self._lags.items()}
        return {r: {"p50_ms": _pct(v, 0.5), "p99_ms": _pct(v, 0.99), "count": float(len(v))}
                for r, v in copies.items() if v}


def _pct(values: list[int], fraction: float) -> float:
    return float(values[min(len(values) - 1, int(fraction * len(values)))])


@dataclass(frozen=True)
class _Route:
    source: str
    targets: tuple[str, ...]


class Replicator:
    """Applies stream records of one region's tables to the replica regions."""

    def __init__(
        self, backend_of: BackendOf, health: RegionHealth, clock: Clock, queues_table: str,
        metrics: LagMetrics,
    ) -> None:
        self._backend_of = backend_of
        self._health = health
        self._clock = clock
        self._queues_table = queues_table
        self.metrics = metrics

    def on_records(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Apply a batch to every replica; return how many changes were written."""
        by_target: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for record in records:
            region, table = stream_origin(record)
            route = self._route(region, table, record)
            for target in route.targets:
                by_target.setdefault((target, table), []).append(record)
        written = 0
        for (target, table), batch in by_target.items():
            self._health.check(target)  # a failure leaves the batch to be retried
            client = self._backend_of(target).clients.table_dynamodb(table)
            applier = ReplicaApplier(client, self._clock.now_ms)
            result = applier.apply(table, batch)
            if table == self._queues_table and result.applied:
                self._backend_of(target).repo.changed()  # its catalogue is read again
            self.metrics.add(target, result.lags_ms)
            written += result.applied
            if result.lags_ms:
                observability.replication_lag(target, max(result.lags_ms))
                for queue_id, lag_ms in queue_lags(batch, self._clock.now_ms()).items():
                    account, _, name = queue_id.partition("/")
                    observability.queue_replication_lag(account, name, target, lag_ms)
        return written

    def _route(self, region: str, table: str, record: Mapping[str, Any]) -> _Route:
        data = record["dynamodb"]
        if table == self._queues_table:
            image = data.get("NewImage") or data.get("OldImage") or {}
            home = str(image.get("home_region", image.get("region", {})).get("S", ""))
            replicas = str(image.get("replicas", {}).get("S", ""))
            targets = tuple(r for r in replicas.split(",") if r) if home == region else ()
            return _Route(region, targets)
        keys = data.get("Keys") or data.get("NewImage") or data.get("OldImage") or {}
        if "pk" not in keys:
            return _Route(region, ())
        queue = self._backend_of(region).repo.get(queue_id_of_key(keys))
        if queue is None or queue.home != region:
            return _Route(region, ())
        return _Route(region, queue.replicas)


class SyncReplicas:
    """Sync mode: a send is written to every reachable replica before it is acknowledged.

    The home write is what acknowledges a message: once it has landed the message will be
    delivered, so a replica write that fails afterwards never turns it into an error (the
    client would retry and the message be delivered twice). The failure is logged and
    counted per region (`LagMetrics.sync_faults`), and the stream path, which runs for
    sync queues too, brings the replica up to date: for those messages the queue has
    async mode's promise until the stream catches up.
    """

    def __init__(
        self, backend_of: BackendOf, health: RegionHealth, metrics: LagMetrics | None = None,
    ) -> None:
        self._backend_of = backend_of
        self._health = health
        self._metrics = metrics or LagMetrics()

    def __call__(
        self, queue: QueueRecord, cluster: str, placed: Sequence[tuple[int, Message]],
    ) -> None:
        """Write the messages (stored at home) to each replica that is up, reporting none
        of its failures to the caller. A replica region that is down is skipped."""
        if queue.replication_mode != "sync" or not placed:
            return
        for region in queue.replicas:
            if not self._health.up(region):
                continue
            store = self._backend_of(region).stores.of(cluster)
            try:
                store.put_if_absent(queue.queue_id, placed)
            except StoreError as exc:
                self._metrics.add_sync_faults(region, len(placed))
                logger.warning("sync replication of %d messages of %s to %s failed; the "
                               "stream will catch it up: %s", len(placed), queue.queue_id,
                               region, exc)


ReplicateSync = Callable[[QueueRecord, str, Sequence[tuple[int, Message]]], None]
