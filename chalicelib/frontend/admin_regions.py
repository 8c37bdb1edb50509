"""The admin view of regions: health, heartbeats, which queues each is home to, and the
replication lag. (Marking a region down or up is a local simulation: `dmqlocal`.)"""

from __future__ import annotations

from typing import Any

from chalicelib.domain.exceptions import StoreError
from chalicelib.runtime import Runtime


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
