"""The external cluster manager: places queues on clusters, records their load, splits hot queues.

A cluster is one messages table with its own stream. New queues go where a consistent-hash
ring, weighted by each cluster's headroom, puts them; a cluster at or over its capacity
gets no new queues. Utilization is the number of active shards placed on a cluster.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any, Protocol

from chalicelib.clusters.placement import (
    ClusterLoad,
    HashRing,
    NoClusterAvailable,
    split_targets,
)
from chalicelib.domain.queues import DEFAULT_CLUSTER, QueueRecord
from chalicelib.metadata.control import ControlRepository

logger = logging.getLogger(__name__)


class NoSuchClusterError(ValueError):
    """A queue was asked to be placed on a cluster this deployment does not have."""

    def __init__(self, cluster: str, clusters: Sequence[str]) -> None:
        super().__init__(
            f"{cluster} is not a cluster of this deployment ({', '.join(clusters)}); more "
            "clusters are configured with DMQ_CLUSTERS.")


class Placement(Protocol):
    """Chooses a new queue's cluster: the one asked for, if it exists, else its own pick."""

    def __call__(self, queue_id: str, wanted: str | None = None) -> str:
        """The cluster; NoSuchClusterError when `wanted` is not configured."""
        ...


@lru_cache(maxsize=16)
def _ring(loads: tuple[ClusterLoad, ...]) -> HashRing:
    """The ring over these loads: built once while the loads stay the same (a ring of
    160 points per cluster took a tenth of a CreateQueue's own time)."""
    return HashRing(loads)


def default_only(queue_id: str, wanted: str | None = None) -> str:
    """The placement of a deployment with one cluster."""
    if wanted not in (None, DEFAULT_CLUSTER):
        raise NoSuchClusterError(str(wanted), (DEFAULT_CLUSTER,))
    return DEFAULT_CLUSTER


class ClusterManager:
    """Placement and utilization over the control table."""

    def __init__(self, control: ControlRepository) -> None:
        self._control = control

    def place(self, queue_id: str, wanted: str | None = None) -> str:
        """The cluster for a new queue: `wanted` when the creator names one (an operator's
        choice wins over capacity), else the ring's; the least loaded one when every
        cluster is full. With one cluster there is no choice to make: nothing is read."""
        clusters = self._control.clusters
        if wanted is not None:
            if wanted not in clusters:
                raise NoSuchClusterError(wanted, clusters)
            return wanted
        if len(clusters) == 1:
            return clusters[0]
        loads = self._control.loads()
        try:
            return _ring(tuple(loads)).place(queue_id)
        except NoClusterAvailable:
            fallback = min(loads, key=lambda c: c.utilization / max(c.capacity, 1e-9))
            logger.warning("every cluster is at capacity; placing %s on %s", queue_id,
                           fallback.name)
            return fallback.name

    def split_target(self, queue: QueueRecord) -> str | None:
        """The cluster a hot queue should spread onto, or None if none can take it."""
        clusters = {s.cluster for s in queue.active_shards}
        current = next(iter(sorted(clusters)))
        loads = [c for c in self._control.loads() if c.name not in clusters - {current}]
        return split_targets(queue.queue_id, current, loads)

    def record_utilization(self, queues: Iterable[QueueRecord]) -> dict[str, int]:
        """Count active shards per cluster and record them; return the counts."""
        counts = _active_shards(queues)
        for cluster in self._control.clusters:
            self._control.record_utilization(cluster, counts.get(cluster, 0))
        return {c: counts.get(c, 0) for c in self._control.clusters}

    def set_capacity(self, cluster: str, capacity: float) -> None:
        """Set a cluster's capacity (in active shards)."""
        if cluster not in self._control.clusters:
            raise KeyError(cluster)
        self._control.set_capacity(cluster, capacity)

    def view(self, queues: Iterable[QueueRecord]) -> list[dict[str, Any]]:
        """Every cluster with its capacity, current utilization and placed queues.

        Utilization is counted from the queues as they are now (the schedule records it
        only once a minute), and recorded where it changed, so placement sees it too.
        """
        queues = list(queues)
        placed: dict[str, set[str]] = {c: set() for c in self._control.clusters}
        for queue in queues:
            for shard in queue.shards:
                placed.setdefault(shard.cluster, set()).add(queue.queue_id)
        counts = _active_shards(queues)
        loads = []
        for recorded in self._control.loads(fresh=True):
            load = replace(recorded, utilization=float(counts.get(recorded.name, 0)))
            if load.utilization != recorded.utilization:
                self._control.record_utilization(load.name, load.utilization)
            loads.append(load)
        return [
            {"cluster": c.name, "capacity": c.capacity, "utilization": c.utilization,
             "accepting": c.accepting, "queues": sorted(placed.get(c.name, set()))}
            for c in loads
        ]


def _active_shards(queues: Iterable[QueueRecord]) -> Counter[str]:
    """Active shards per cluster."""
    counts: Counter[str] = Counter()
    for queue in queues:
        counts.update(s.cluster for s in queue.active_shards)
    return counts
