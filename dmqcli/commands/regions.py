"""`dmq regions status|failover|restore|tick`: the regions' health, heartbeats, home queues
and replication lag; and, on the local server, a simulated region failure."""

from __future__ import annotations

import argparse
import time
from typing import Any

from dmqcli.admin_api import quote, without_route
from dmqcli.confirm import add_yes, confirm
from dmqcli.context import Context
from dmqcli.errors import CliError
from dmqcli.output import iso_ms
from dmqcli.parsing import examples, non_negative

POLL_S = 0.25
LOCAL_ONLY = ("a deployed stage has no region simulation routes; on AWS a region fails "
              "by itself")
REFUSED = "FailoverRefused"


def _status_table(ctx: Context, data: dict[str, Any]) -> None:
    lag = data.get("replication_lag_ms", {})
    ctx.output.table(
        data, ("region", "up", "last heartbeat", "home of", "lag p50 ms", "lag p99 ms"),
        ((r["region"], r["up"], iso_ms(r["last_heartbeat_ms"]),
          ", ".join(r["home_of_replicated_queues"]) or "-",
          lag.get(r["region"], {}).get("p50_ms"), lag.get(r["region"], {}).get("p99_ms"))
         for r in data["regions"]), empty="(no regions)")


def _status(ctx: Context, args: argparse.Namespace) -> None:
    _status_table(ctx, ctx.admin.get("/admin/regions"))


def _simulate(ctx: Context, region: str, state: str, force: bool = False) -> Any:
    try:
        return ctx.admin.post(f"/admin/regions/{quote(region)}/{state}",
                              query={"force": "true"} if force else None)
    except CliError as exc:
        if exc.code == REFUSED:  # the server's remedy, in the command line's words
            message = exc.message.replace("force=true", "--force")
            if "--force" not in message:
                message += " (--force marks it down anyway)"
            raise CliError(message, exc.status, exc.code, exc.admin) from None
        raise without_route(exc, LOCAL_ONLY) from None


def _homes(data: dict[str, Any], region: str) -> set[str]:
    return {q for r in data["regions"] if r["region"] == region
            for q in r["home_of_replicated_queues"]}


def _failover(ctx: Context, args: argparse.Namespace) -> None:
    region = args.region_name
    confirm(args, f"Mark region {region} down? Its requests fail and its replicas take over "
            f"its queues until `dmq regions restore {region}`.", f"failing over {region}")
    before = _homes(ctx.admin.get("/admin/regions"), region)
    data = _simulate(ctx, region, "down", args.force)
    deadline = time.monotonic() + args.wait
    while args.wait and before:
        elsewhere = set().union(*(set(r["home_of_replicated_queues"]) for r in data["regions"]
                                  if r["region"] != region and r["up"]))
        if before <= elsewhere:
            break
        if time.monotonic() >= deadline:
            raise CliError(f"{len(before - elsewhere)} queue(s) of {region} have no new "
                           f"home after {args.wait:g} s: {sorted(before - elsewhere)}")
        time.sleep(POLL_S)
        data = ctx.admin.get("/admin/regions")
    _status_table(ctx, data)


def _restore(ctx: Context, args: argparse.Namespace) -> None:
    _status_table(ctx, _simulate(ctx, args.region_name, "up"))


def _tick(ctx: Context, args: argparse.Namespace) -> None:
    ctx.output.fields(_simulate(ctx, args.region_name, "tick"))


def register(sub: Any) -> None:
    """Add `regions` and its subcommands."""
    regions = sub.add_parser("regions", help="region status; simulated failover (local)")
    actions = regions.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser("status", help="health, heartbeats, home queues, lag",
                                epilog=examples("dmq regions status", "dmq regions status --json"))
    status.set_defaults(func=_status)
    failover = actions.add_parser(
        "failover", help="mark a region down so its replicas take over its queues (local "
                         "server only; asks first; refused when no other healthy region "
                         "can take over)",
        epilog=examples("dmq regions failover us-east-1 --wait 30",
                        "dmq regions failover us-east-1 --yes --force   # even the last one"))
    failover.add_argument("region_name", metavar="REGION")
    failover.add_argument("--wait", type=non_negative, default=0.0, metavar="SECONDS",
                          help="wait until every queue the region was home to has a new home")
    failover.add_argument("--force", action="store_true",
                          help="mark it down even when no other healthy region can take over "
                               "(every request to it then fails until it is restored)")
    add_yes(failover)
    failover.set_defaults(func=_failover)
    restore = actions.add_parser("restore", help="bring a region marked down back up; it "
                                                 "rejoins as a replica (local server only)",
                                 epilog=examples("dmq regions restore us-east-1"))
    restore.add_argument("region_name", metavar="REGION")
    restore.set_defaults(func=_restore)
    tick = actions.add_parser("tick", help="run a region's heartbeat and failover pass now "
                                           "(local server only)",
                              epilog=examples("dmq regions tick eu-west-1"))
    tick.add_argument("region_name", metavar="REGION")
    tick.set_defaults(func=_tick)
