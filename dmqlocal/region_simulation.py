"""Simulated region failure, served by the local server only.

`POST /admin/regions/{region}/down|up|tick` marks a region down or up, or runs its
manager now (marking the last healthy region down is refused unless `?force=true`).
The routes are added to the app when the local runner starts, so a deployed stage has
none: on AWS a region fails by itself.
"""

from __future__ import annotations

from typing import Any

from chalice import Chalice, IAMAuthorizer, Response

from chalicelib.frontend.errors import to_sqs_error
from chalicelib.regions.admin_api import check_failover, regions_view
from chalicelib.runtime import Runtime
from chalicelib.service.exceptions import InvalidParameterValueError

PATH = "/admin/regions/{region}/{state}"
STATES = ("down", "up", "tick")


def _region(runtime: Runtime, region: str) -> str:
    if region not in runtime.settings.all_regions:
        raise InvalidParameterValueError(
            f"Unknown region {region}; this deployment has {list(runtime.settings.all_regions)}.")
    return region


def mark_region(runtime: Runtime, region: str, up: bool, force: bool = False) -> dict[str, Any]:
    """Mark a region down (its requests, streams and heartbeats stop) or up again; down is
    refused when no other healthy region can take over, unless forced.

    Coming back, the region's manager runs at once: it adopts newer queue records from
    its peers, so it forwards those queues to their new home instead of serving them.
    """
    _region(runtime, region)
    if not up:
        check_failover(runtime, region, force)
    runtime.health.mark(region, up)
    if up:
        runtime.failover(region).tick()
    return regions_view(runtime)


def failover_tick(runtime: Runtime, region: str) -> dict[str, Any]:
    """Run one heartbeat/failover/rejoin pass of a region now."""
    report = runtime.failover(_region(runtime, region)).tick()
    return {"region": region, "promoted": report.promoted, "adopted": report.adopted,
            "resynced": report.resynced, "recovered": report.recovered}


def set_region_state(runtime: Runtime, region: str, state: str,
                     force: bool = False) -> Response:
    """One simulation request, answered in the admin routes' shape."""
    if state not in STATES:
        return Response(body={"code": "InvalidParameterValue",
                              "message": "state must be down, up or tick"}, status_code=400)
    try:
        body = (failover_tick(runtime, region) if state == "tick"
                else mark_region(runtime, region, state == "up", force))
    except Exception as exc:  # noqa: BLE001 - mapped like every SQS error
        error = to_sqs_error(exc)
        return Response(body={"code": error.code, "message": error.message},
                        status_code=error.status)
    return Response(body=body, status_code=200)


class _Target:
    """The runtime the routes act on (the latest runner's; one app serves one runner)."""

    runtime: Runtime | None = None


def install(app: Chalice, runtime: Runtime) -> None:
    """Add the simulation routes to the app (once; later calls only retarget them)."""
    _Target.runtime = runtime
    if "POST" in app.routes.get(PATH, {}):
        return

    def admin_region_state(region: str, state: str) -> Response:
        """Admin (local only): mark a region `down` or `up`, or run its manager (`tick`)."""
        assert _Target.runtime is not None
        request = app.current_request
        params = request.query_params if request is not None else None
        force = params is not None and params.get("force", "").lower() in ("true", "1")
        return set_region_state(_Target.runtime, region, state, force)

    app.route(PATH, methods=["POST"], authorizer=IAMAuthorizer())(admin_region_state)
