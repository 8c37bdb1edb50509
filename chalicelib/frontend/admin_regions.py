"""The admin view of regions: health, heartbeats, which queues each is home to, and the
replication lag; and, for local runs, marking a region down or up to simulate failure."""

from __future__ import annotations

from typing import Any

from chalicelib.domain.exceptions import StoreError
from chalicelib.runtime import Runtime
from chalicelib.service.exceptions import InvalidParameterValueError


def _region(runtime: Runtime, region: str) -> str:
    if region not in runtime.settings.all_regions:
        raise InvalidParameterValueError(
            f"Unknown region {region}; this deployment has {list(runtime.settings.all_regions)}.")
    return region


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
    return {"regions": rows, "replication_lag_ms": runtime.lag.summary()}


def mark_region(runtime: Runtime, region: str, up: bool) -> dict[str, Any]:
    """Mark a region down (its requests, streams and heartbeats stop) or up again.

    Coming back, the region's manager runs at once: it adopts newer queue records from
    its peers, so it forwards those queues to their new home instead of serving them.
    """
    runtime.health.mark(_region(runtime, region), up)
    if up:
        runtime.failover(region).tick()
    return regions_view(runtime)


def failover_tick(runtime: Runtime, region: str) -> dict[str, Any]:
    """Run one heartbeat/failover/rejoin pass of a region now."""
    report = runtime.failover(_region(runtime, region)).tick()
    return {"region": region, "promoted": report.promoted, "adopted": report.adopted,
            "resynced": report.resynced, "recovered": report.recovered}
