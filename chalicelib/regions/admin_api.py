"""The admin view of regions: health, heartbeats, which queues each is home to, and the
replication lag; and the rule a simulated region failure must pass. (Marking a region
down or up is a local simulation: `dmqlocal`.)"""

from __future__ import annotations

from typing import Any, Protocol

from chalicelib.domain.exceptions import StoreError
from chalicelib.metadata.control import ControlRepository
from chalicelib.metadata.repository import QueueRepository
from chalicelib.regions.reachability import RegionHealth
from chalicelib.regions.replication import LagMetrics
from chalicelib.service.exceptions import FailoverRefusedError
from chalicelib.settings import Settings


class RegionStores(Protocol):
    """What the view reads of one region: its heartbeats and its queues."""

    @property
    def control(self) -> ControlRepository: ...

    @property
    def repo(self) -> QueueRepository: ...


class Runtime(Protocol):
    """What the view reads of the runtime (`chalicelib.runtime.Runtime` is one)."""

    @property
    def settings(self) -> Settings: ...

    health: RegionHealth
    lag: LagMetrics

    def backend(self, region: str = "") -> RegionStores: ...


def regions_view(runtime: Runtime) -> dict[str, Any]:
    """Every region with its health, last heartbeat (as seen by itself) and home queues."""
    rows = []
    for region in runtime.settings.all_regions:
        up = runtime.health.up(region)
        beat: int | None = None
        homes: list[str] = []
        if up:
            backend = runtime.backend(region)
            try:
                beat = backend.control.last_beat(region)
                homes = sorted(q.queue_id for q in backend.repo.scan_active()
                               if q.home == region and q.replicas)
            except StoreError:
                up = False
        rows.append({"region": region, "up": up, "last_heartbeat_ms": beat,
                     "home_of_replicated_queues": homes})
    return {"regions": rows, "replication_lag_ms": runtime.lag.summary(),
            "sync_replica_write_failures": runtime.lag.sync_faults()}


def takeover_regions(runtime: Runtime, region: str) -> list[str]:
    """The deployment's other regions that are up: those that could take over `region`."""
    return [r for r in runtime.settings.all_regions if r != region and runtime.health.up(r)]


def check_failover(runtime: Runtime, region: str, force: bool = False) -> None:
    """Refuse to mark an up region down when no other healthy region can take over its
    queues, unless forced: nothing would serve them, and every request to it would be
    ServiceUnavailable until the region is restored."""
    if force or not runtime.health.up(region) or takeover_regions(runtime, region):
        return
    regions = ", ".join(runtime.settings.all_regions)
    raise FailoverRefusedError(
        f"No other healthy region can take over from {region} (this deployment's regions: "
        f"{regions}): marking it down would answer every request to it with "
        "ServiceUnavailable until it is restored; force=true marks it down anyway.")
