"""Placement of queues on clusters: a consistent-hash ring weighted by each cluster's headroom.

Each cluster that still accepts queues gets virtual nodes in proportion to its headroom
(capacity minus utilization), at least one; a cluster at or over capacity gets none. A key
goes to the first virtual node clockwise from its hash. A cluster's virtual nodes are always
`name#0 .. name#(n-1)`, so adding a cluster or changing one cluster's load only adds or
removes points, and moves only the keys that must move.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

VNODES_PER_CLUSTER = 160


class NoClusterAvailable(Exception):
    """Every cluster is at or over its capacity."""


@dataclass(frozen=True)
class ClusterLoad:
    """A cluster's capacity and recorded utilization, in the same unit (e.g. active shards)."""

    name: str
    capacity: float
    utilization: float

    @property
    def headroom(self) -> float:
        """What the cluster can still take."""
        return max(0.0, self.capacity - self.utilization)

    @property
    def over_capacity(self) -> bool:
        """True when the cluster is full."""
        return self.utilization >= self.capacity

    @property
    def accepting(self) -> bool:
        """True when new queues may be placed here."""
        return self.capacity > 0 and not self.over_capacity


def _hash(text: str) -> int:
    """A hash that is stable across processes (unlike the built-in hash())."""
    return int.from_bytes(hashlib.md5(text.encode(), usedforsecurity=False).digest()[:8], "big")


class HashRing:
    """The ring over the clusters that accept queues.

    A cluster gets `headroom * vnodes_per_cluster / mean capacity` virtual nodes (at least
    one): `vnodes_per_cluster` on average while the clusters are empty. Scaling by capacity
    rather than by total headroom keeps every other cluster's points fixed when one
    cluster's utilization changes, so only keys to or from that cluster move.
    """

    def __init__(
        self, loads: Sequence[ClusterLoad], vnodes_per_cluster: int = VNODES_PER_CLUSTER
    ) -> None:
        accepting = [c for c in loads if c.accepting]
        total_capacity = sum(max(0.0, c.capacity) for c in loads)
        per_unit = vnodes_per_cluster * len(loads) / total_capacity if accepting else 0.0
        points: list[tuple[int, str]] = []
        for cluster in accepting:
            count = max(1, round(per_unit * cluster.headroom))
            points += [(_hash(f"{cluster.name}#{i}"), cluster.name) for i in range(count)]
        points.sort()
        self._hashes = [h for h, _ in points]
        self._names = [n for _, n in points]
        self.clusters = [c.name for c in accepting]

    def _walk(self, key: str) -> Iterator[str]:
        """Each accepting cluster once, in clockwise order from the key's hash."""
        start = bisect.bisect(self._hashes, _hash(key))
        seen: set[str] = set()
        for step in range(len(self._names)):
            name = self._names[(start + step) % len(self._names)]
            if name not in seen:
                seen.add(name)
                yield name
                if len(seen) == len(self.clusters):
                    return

    def place(self, key: str) -> str:
        """The cluster for a key; raises NoClusterAvailable when none accepts."""
        return self.place_distinct(key, 1)[0]

    def place_distinct(self, key: str, count: int) -> list[str]:
        """Up to `count` distinct clusters, walking clockwise from the key.

        Raises NoClusterAvailable when no cluster accepts.
        """
        if not self._names:
            raise NoClusterAvailable("every cluster is at or over its capacity")
        found: list[str] = []
        for name in self._walk(key):
            if len(found) >= count:
                break
            found.append(name)
        return found


def split_targets(key: str, current: str, loads: Sequence[ClusterLoad]) -> str | None:
    """The cluster a hot queue on `current` should spread onto, or None if no other accepts."""
    ring = HashRing(loads)
    try:
        walk = ring.place_distinct(key, len(ring.clusters))
    except NoClusterAvailable:
        return None
    return next((name for name in walk if name != current), None)
