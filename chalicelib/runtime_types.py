"""What a region's back-end handlers work with, shared by the runtime and the services."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from chalicelib.aws import Clients
from chalicelib.backend.archive import Sink
from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.counters import ShardCounters
from chalicelib.clock import Clock
from chalicelib.clusters.stores import ClusterStores
from chalicelib.metadata.control import ControlRepository
from chalicelib.metadata.repository import QueueRepository


@dataclass(frozen=True)
class Backend:
    """What the stream and schedule handlers of one region work with."""

    region: str
    stores: ClusterStores
    bodies: BodyStore
    repo: QueueRepository
    control: ControlRepository
    clients: Clients
    clock: Clock
    counters: ShardCounters  # the shard counts, kept from the messages streams


BackendOf = Callable[[str], Backend]


class LocalParts(Protocol):
    """What only the local runtime builds, from a folder: message bodies, the audit
    archive and key files on disk (`dmqlocal.folders`). The Lambda package carries none
    of it."""

    def key(self, path: str, size: int) -> bytes:
        """The `size`-byte key in the file `path`, made at random on first use."""
        ...

    def secret(self, path: str) -> str:
        """The secret text in the file `path`, made at random on first use."""
        ...

    def bodies(self, folder: str) -> BodyStore:
        """Message bodies kept in `folder`."""
        ...

    def archive(self, folder: str) -> Sink:
        """The audit archive under `folder`."""
        ...
