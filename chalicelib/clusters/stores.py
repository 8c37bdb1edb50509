"""The message stores of every cluster (one messages table each), looked up by cluster name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from chalicelib.backend.store import MessageStore
from chalicelib.domain.exceptions import StoreError


@runtime_checkable
class ActiveShards(Protocol):
    """A store that keeps the set of its active shards: those holding messages or written
    lately (`backend.counters.ShardCounters.active`)."""

    def active_shards(self) -> list[tuple[str, int]]:
        """The (queue id, shard) of the active shards."""
        ...

    def release_quiet(self, shards: Sequence[tuple[str, int]], now_ms: int) -> int:
        """Take the empty, quiet ones among `shards` out of the set; how many."""
        ...


class UnknownClusterError(StoreError):
    """A shard names a cluster this deployment has no table for."""


class ClusterStores:
    """Maps a cluster name to its MessageStore."""

    def __init__(self, stores: Mapping[str, MessageStore], apart: Iterable[str] = ()) -> None:
        self._stores = dict(stores)
        self._apart = frozenset(apart)
        # When each active shard's retention sweep falls due (epoch ms), by (cluster,
        # queue id, shard): `backend.maintenance.sweep_expired` keeps it.
        self.sweep_due: dict[tuple[str, str, int], int] = {}

    def apart(self, cluster: str) -> bool:
        """Whether the cluster's table is in a store of its own (DMQ_CLUSTER_ENDPOINTS):
        no transaction can span it and another cluster's table or the control table."""
        return cluster in self._apart

    def of(self, cluster: str) -> MessageStore:
        """The store of a cluster."""
        try:
            return self._stores[cluster]
        except KeyError:
            raise UnknownClusterError(
                f"No messages table is configured for cluster {cluster}."
            ) from None

    @property
    def names(self) -> list[str]:
        """Every configured cluster, in order."""
        return list(self._stores)

    def items(self) -> list[tuple[str, MessageStore]]:
        """(cluster, store) pairs."""
        return list(self._stores.items())
