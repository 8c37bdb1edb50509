"""The control table: cluster capacity and utilization, region heartbeats, the store epoch.

Keys are `cluster#<name>`, `heartbeat#<region>` and `epoch` (see `metadata.epoch`).
Cluster reads are cached for a few seconds per container, like queue metadata;
heartbeats and writes go straight through.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from chalicelib.clusters.placement import ClusterLoad
from chalicelib.dynamo_batches import get_all
from chalicelib.dynamo_errors import translate_errors
from chalicelib.metadata.epoch import ensure_epoch

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEFAULT_CAPACITY = 1000.0


class ControlRepository:
    """Reads and writes cluster records of the control table."""

    def __init__(
        self, client: DynamoDBClient, table: str, clusters: Sequence[str],
        default_capacity: float = DEFAULT_CAPACITY, cache_seconds: float = 5.0,
    ) -> None:
        self._db = client
        self._table = table
        self._clusters = list(clusters)
        self._default_capacity = default_capacity
        self._cache_seconds = cache_seconds
        self._cached: tuple[float, list[ClusterLoad]] | None = None
        self._lock = threading.Lock()

    @property
    def clusters(self) -> list[str]:
        """The configured clusters, in order."""
        return list(self._clusters)

    def loads(self, fresh: bool = False) -> list[ClusterLoad]:
        """Capacity and utilization of every configured cluster (defaults where unrecorded)."""
        now = time.monotonic()
        with self._lock:
            cached = self._cached
        if cached and not fresh and now - cached[0] < self._cache_seconds:
            return cached[1]
        keys = [{"key": {"S": f"cluster#{name}"}} for name in self._clusters]
        # Every key is read, unprocessed ones again: a cluster left unread would pass for
        # one with no record (the default capacity) and draw shards it may not have room for.
        found = get_all(self._db, self._table, keys)
        by_name = {str(i["key"]["S"]).split("#", 1)[1]: i for i in found}
        loads = []
        for name in self._clusters:
            item = by_name.get(name, {})
            capacity = float(item["capacity"]["N"]) if "capacity" in item else (
                self._default_capacity)
            used = float(item["utilization"]["N"]) if "utilization" in item else 0.0
            loads.append(ClusterLoad(name, capacity, used))
        with self._lock:
            self._cached = (now, loads)
        return loads

    def set_capacity(self, cluster: str, capacity: float) -> None:
        """Record a cluster's capacity (in shards)."""
        self._update(cluster, "capacity", capacity)

    def record_utilization(self, cluster: str, utilization: float) -> None:
        """Record a cluster's utilization (active shards placed on it)."""
        self._update(cluster, "utilization", utilization)

    def beat(self, region: str, now_ms: int) -> None:
        """Record a heartbeat of a region."""
        with translate_errors():
            self._db.put_item(TableName=self._table, Item={
                "key": {"S": f"heartbeat#{region}"}, "at": {"N": str(now_ms)}})

    def last_beat(self, region: str) -> int | None:
        """When a region's last heartbeat reached this table, or None."""
        with translate_errors():
            item = self._db.get_item(TableName=self._table, Key={
                "key": {"S": f"heartbeat#{region}"}}, ConsistentRead=True).get("Item")
        return int(item["at"]["N"]) if item else None

    def epoch(self) -> str:
        """The epoch of this region's store (created if it has none yet)."""
        return ensure_epoch(self._db, self._table)

    def _update(self, cluster: str, field: str, value: float) -> None:
        with translate_errors():
            self._db.update_item(
                TableName=self._table, Key={"key": {"S": f"cluster#{cluster}"}},
                UpdateExpression="SET #f = :v", ExpressionAttributeNames={"#f": field},
                ExpressionAttributeValues={":v": {"N": repr(float(value))}},
            )
        with self._lock:
            self._cached = None
