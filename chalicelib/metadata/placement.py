"""Placement of queues on clusters: a consistent-hash ring weighted by each cluster's headroom.

Each cluster that still accepts queues gets virtual nodes in proportion to its share of
the total headroom (capacity minus utilization); a cluster at or over capacity gets none.
A key goes to the first virtual node clockwise from its hash, so adding a cluster or
changing one cluster's load moves only the keys that must move.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

VNODES_PER_CLUSTER = 160


class NoClusterAvailable(Exception):
    """Every cluster is at or over its capacity."""


@dataclass(frozen=True)
class ClusterLoad:
    """A cluster's capacity and recorded utilization, in the same unit (active shards)."""

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
    return int.from_bytes(hashlib.md5(text.encode(), usedforsecurity=False).digest()[:8], "big")


class HashRing:
    """The ring over the clusters that accept queues."""

    def __init__(self, loads: Sequence[ClusterLoad], vnodes_per_cluster: int = VNODES_PER_CLUSTER):
        accepting = [c for c in loads if c.accepting]
        total = sum(c.headroom for c in accepting)
        budget = vnodes_per_cluster * len(accepting)
        points: list[tuple[int, str]] = []
        for cluster in accepting:
            count = max(1, round(budget * cluster.headroom / total)) if total else 1
            points += [(_hash(f"{cluster.name}#{i}"), cluster.name) for i in range(count)]
        points.sort()
        self._hashes = [h for h, _ in points]
        self._names = [n for _, n in points]
        self.clusters = [c.name for c in accepting]

    def place(self, key: str) -> str:
        """The cluster for a key."""
        return self.place_distinct(key, 1)[0]

    def place_distinct(self, key: str, count: int) -> list[str]:
        """Up to `count` distinct clusters, walking clockwise from the key."""
        if not self._names:
            raise NoClusterAvailable("every cluster is at or over its capacity")
        start = bisect.bisect(self._hashes, _hash(key))
        found: list[str] = []
        for step in range(len(self._names)):
            name = self._names[(start + step) % len(self._names)]
            if name not in found:
                found.append(name)
                if len(found) == count:
                    break
        return found


def split_targets(key: str, current: str, loads: Sequence[ClusterLoad]) -> str | None:
    """The cluster a hot queue on `current` should spread onto, or None if none accepts."""
    others = [c for c in loads if c.name != current]
    try:
        candidates = HashRing(others).place_distinct(key, 1)
    except NoClusterAvailable:
        return None
    return candidates[0]
