"""`dmq clusters list|capacity` and `dmq shards show|set|split|pin|unpin`: where queues
live, how many shards they have, and whether the autoscaler sets that count."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.admin_api import quote
from dmqcli.commands.queues import QUEUE_HELP
from dmqcli.context import Context
from dmqcli.output import iso_ms
from dmqcli.parsing import bounded_int, examples, non_negative

MAX_SHARDS = 64  # the service's limit (chalicelib.clusters.shards.MAX_SHARDS)


def _clusters_table(ctx: Context, data: dict[str, Any]) -> None:
    ctx.output.table(data, ("cluster", "capacity", "utilization", "accepting", "queues"),
                     ((c["cluster"], c["capacity"], c["utilization"], c["accepting"],
                       ", ".join(c["queues"]) or "-") for c in data["clusters"]),
                     empty="(no clusters)")


def _list(ctx: Context, args: argparse.Namespace) -> None:
    _clusters_table(ctx, ctx.admin.get("/admin/clusters"))


def _capacity(ctx: Context, args: argparse.Namespace) -> None:
    _clusters_table(ctx, ctx.admin.put(f"/admin/clusters/{quote(args.cluster)}",
                                       {"capacity": args.capacity}))


def _shards_table(ctx: Context, record: dict[str, Any]) -> None:
    ctx.output.table(record, ("shard", "cluster", "state", "draining since"),
                     ((s["id"], s["cluster"], s["state"], iso_ms(s.get("draining_since_ms")))
                      for s in record["shards"]),
                     title=f"{record['queue_id']}: {record['shard_count']} active shard(s)"
                     + _autoscale_note(record.get("autoscale")))


def _autoscale_note(mode: str | None) -> str:
    """How the count is set: by the autoscaler, pinned by an admin, or fixed."""
    notes = {"auto": ", set by the autoscaler",
             "pinned": ", pinned (dmq shards unpin hands it back to the autoscaler)",
             "off": ", fixed (no autoscaling)"}
    return notes.get(mode or "", "")


def _show(ctx: Context, args: argparse.Namespace) -> None:
    _shards_table(ctx, ctx.admin.get(ctx.admin_path(args.queue)))


def _set(ctx: Context, args: argparse.Namespace) -> None:
    path = f"{ctx.admin_path(args.queue)}/shards"
    _shards_table(ctx, ctx.admin.put(path, {"count": args.count}))


def _pin(ctx: Context, args: argparse.Namespace) -> None:
    path = f"{ctx.admin_path(args.queue)}/autoscale"
    _shards_table(ctx, ctx.admin.put(path, {"pinned": args.action == "pin"}))


def _split(ctx: Context, args: argparse.Namespace) -> None:
    path = f"{ctx.admin_path(args.queue)}/split"
    _shards_table(ctx, ctx.admin.post(path, {"cluster": args.cluster} if args.cluster else {}))


def register(sub: Any) -> None:
    """Add `clusters` and `shards`."""
    clusters = sub.add_parser("clusters", help="clusters: capacity, utilization, queues")
    actions = clusters.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="every cluster", epilog=examples(
        "dmq clusters list", "dmq clusters list --json")).set_defaults(func=_list)
    capacity = actions.add_parser("capacity", help="set a cluster's capacity in active shards "
                                                   "(0 stops placing queues there)",
                                  epilog=examples("dmq clusters capacity c2 8"))
    capacity.add_argument("cluster")
    capacity.add_argument("capacity", type=non_negative)
    capacity.set_defaults(func=_capacity)

    shards = sub.add_parser("shards", help="a queue's shards: show, scale, split, pin")
    actions = shards.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="a queue's shards and clusters",
                              epilog=examples("dmq shards show orders"))
    show.add_argument("queue", help=QUEUE_HELP)
    show.set_defaults(func=_show)
    scale = actions.add_parser("set", help="scale a queue to COUNT shards (scale-in drains) "
                                           "and pin it there",
                               epilog=examples("dmq shards set orders 4"))
    scale.add_argument("queue", help=QUEUE_HELP)
    scale.add_argument("count", type=bounded_int(1, MAX_SHARDS), help=f"1 to {MAX_SHARDS}")
    scale.set_defaults(func=_set)
    split = actions.add_parser("split", help="spread a hot queue onto another cluster "
                                             "(needs DMQ_CLUSTERS on the server)",
                               epilog=examples("dmq shards split orders --cluster c2"))
    split.add_argument("queue", help=QUEUE_HELP)
    split.add_argument("--cluster", help="default: the placement ring's choice")
    split.set_defaults(func=_split)
    for action, text in (("pin", "keep a queue's shard count: the autoscaler leaves it alone"),
                         ("unpin", "hand a queue's shard count back to the autoscaler")):
        pin = actions.add_parser(action, help=text,
                                 epilog=examples(f"dmq shards {action} orders"))
        pin.add_argument("queue", help=QUEUE_HELP)
        pin.set_defaults(func=_pin)
