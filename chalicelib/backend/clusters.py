"""The message stores of every cluster (one messages table each), looked up by cluster name."""

from __future__ import annotations

from collections.abc import Mapping

from chalicelib.backend.store import MessageStore
from chalicelib.domain.exceptions import StoreError


class UnknownClusterError(StoreError):
    """A shard names a cluster this deployment has no table for."""


class ClusterStores:
    """Maps a cluster name to its MessageStore."""

    def __init__(self, stores: Mapping[str, MessageStore]) -> None:
        self._stores = dict(stores)

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
