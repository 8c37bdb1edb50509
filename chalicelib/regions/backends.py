"""What one region's back end is made of: its stores and repositories, as the runtime
builds them and the handlers, failover and replication reach them (another region's
included, through `BackendOf`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.aws import Clients
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
