"""`dmq stats`: each queue's approximate visible, in-flight and delayed counts, once or
every few seconds (`--watch`)."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dmqcli.commands.queues import QUEUE_HELP
from dmqcli.context import Context
from dmqcli.output import console
from dmqcli.parsing import bounded_int, examples, non_negative

if TYPE_CHECKING:
    from rich.table import Table

COUNTS = {"visible": "ApproximateNumberOfMessages",
          "in_flight": "ApproximateNumberOfMessagesNotVisible",
          "delayed": "ApproximateNumberOfMessagesDelayed"}


def _urls(ctx: Context, queues: list[str]) -> list[str]:
    if queues:
        return [ctx.queue(q).url for q in queues]
    urls: list[str] = []
    for page in ctx.sqs.get_paginator("list_queues").paginate(MaxResults=1000):
        urls += page.get("QueueUrls", [])
    return urls


def snapshot(ctx: Context, urls: list[str]) -> list[dict[str, Any]]:
    """One row of counts per queue."""
    rows = []
    for url in urls:
        attributes = ctx.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=list(COUNTS.values()))["Attributes"]
        rows.append({"queue": url.rstrip("/").rsplit("/", 1)[-1], "url": url,
                     **{key: int(attributes.get(name, 0)) for key, name in COUNTS.items()}})
    return rows


def _table(rows: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table("queue", "visible", "in flight", "delayed",
                  title=f"at {datetime.now(UTC):%H:%M:%S} UTC", title_justify="left")
    for row in rows:
        table.add_row(row["queue"], str(row["visible"]), str(row["in_flight"]),
                      str(row["delayed"]))
    return table


def _stats(ctx: Context, args: argparse.Namespace) -> None:
    urls = _urls(ctx, args.queue)
    if args.watch is None:
        rows = snapshot(ctx, urls)
        ctx.output.table({"queues": rows}, ("queue", "visible", "in flight", "delayed"),
                         ((r["queue"], r["visible"], r["in_flight"], r["delayed"])
                          for r in rows), empty="(no queues)")
        return
    out = console()
    if ctx.output.as_json or not out.is_terminal:
        for round_ in range(args.times):
            rows = snapshot(ctx, urls)
            if ctx.output.as_json:
                ctx.output.json({"at": datetime.now(UTC).isoformat(), "queues": rows})
            else:
                out.print(_table(rows))
            if round_ + 1 < args.times:
                time.sleep(args.watch)
        return
    from rich.live import Live

    with Live(_table(snapshot(ctx, urls)), console=out, auto_refresh=False) as live:
        for _ in range(args.times - 1):
            time.sleep(args.watch)
            live.update(_table(snapshot(ctx, urls)), refresh=True)


def register(sub: Any) -> None:
    """Add `stats`."""
    stats = sub.add_parser("stats", help="visible, in-flight and delayed counts per queue",
                           epilog=examples("dmq stats", "dmq stats orders payments --watch 2",
                                           "dmq stats orders --json"))
    stats.add_argument("queue", nargs="*", help=f"{QUEUE_HELP} (default: all of yours)")
    stats.add_argument("--watch", type=non_negative, metavar="SECONDS",
                       help="refresh every SECONDS")
    stats.add_argument("--times", type=bounded_int(1, 100_000), default=60,
                       help="with --watch, how many refreshes (default 60)")
    stats.set_defaults(func=_stats)
