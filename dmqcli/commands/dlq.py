"""`dmq dlq redrive|tasks|cancel`: move a dead-letter queue's messages back (SQS's
StartMessageMoveTask), watching the task with a progress bar until it ends."""

from __future__ import annotations

import argparse
import time
from typing import Any

from dmqcli.commands.queues import QUEUE_HELP
from dmqcli.context import Context
from dmqcli.errors import CliError
from dmqcli.output import iso_ms
from dmqcli.parsing import bounded_int, examples, non_negative

POLL_S = 0.5
ENDED = ("COMPLETED", "CANCELLED", "FAILED")


def _newest_task(ctx: Context, source_arn: str) -> dict[str, Any]:
    results = ctx.sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=1)["Results"]
    if not results:
        raise CliError(f"{source_arn} has no message move task")
    task: dict[str, Any] = results[0]
    return task


def _watch(ctx: Context, source_arn: str, timeout_s: float) -> dict[str, Any]:
    """Poll the newest task until it ends or time runs out; draw its progress on stderr."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    deadline = time.monotonic() + timeout_s
    task = _newest_task(ctx, source_arn)
    columns = (TextColumn("[bold]redrive[/bold] {task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False,
                  disable=ctx.output.as_json) as progress:
        bar = progress.add_task(task["Status"].lower(),
                                total=task.get("ApproximateNumberOfMessagesToMove"))
        while True:
            progress.update(bar, completed=task.get("ApproximateNumberOfMessagesMoved", 0),
                            total=task.get("ApproximateNumberOfMessagesToMove"),
                            description=task["Status"].lower())
            if task["Status"] in ENDED or time.monotonic() >= deadline:
                return task
            time.sleep(POLL_S)
            task = _newest_task(ctx, source_arn)


def _show(ctx: Context, task: dict[str, Any]) -> None:
    task = {k: v for k, v in task.items() if k != "ResponseMetadata"}
    ctx.output.fields(task, title="message move task", times_ms=("StartedTimestamp",))


def _redrive(ctx: Context, args: argparse.Namespace) -> None:
    source = ctx.queue_arn(args.queue)
    params: dict[str, Any] = {"SourceArn": source}
    if args.destination:
        params["DestinationArn"] = ctx.queue_arn(args.destination)
    if args.rate is not None:
        params["MaxNumberOfMessagesPerSecond"] = args.rate
    handle = ctx.sqs.start_message_move_task(**params)["TaskHandle"]
    if args.no_wait:
        ctx.output.fields({"TaskHandle": handle, "SourceArn": source})
        return
    task = _watch(ctx, source, args.timeout)
    _show(ctx, task)
    if task["Status"] == "FAILED":
        raise CliError(f"the redrive failed: {task.get('FailureReason', 'no reason given')}")
    if task["Status"] not in ENDED:
        raise CliError(f"the redrive is still {task['Status']} after {args.timeout:g} s "
                       f"(cancel it with: dmq dlq cancel {handle})")


def _tasks(ctx: Context, args: argparse.Namespace) -> None:
    source = ctx.queue_arn(args.queue)
    results = ctx.sqs.list_message_move_tasks(SourceArn=source, MaxResults=10)["Results"]
    ctx.output.table(
        {"Results": results}, ("status", "moved", "to move", "destination", "started"),
        ((r["Status"], r.get("ApproximateNumberOfMessagesMoved"),
          r.get("ApproximateNumberOfMessagesToMove"), r.get("DestinationArn", "(origins)"),
          iso_ms(r.get("StartedTimestamp"))) for r in results), empty="(no tasks)")


def _cancel(ctx: Context, args: argparse.Namespace) -> None:
    result = ctx.sqs.cancel_message_move_task(TaskHandle=args.task_handle)
    ctx.output.fields({"TaskHandle": args.task_handle, "ApproximateNumberOfMessagesMoved":
                       result.get("ApproximateNumberOfMessagesMoved")})


def register(sub: Any) -> None:
    """Add `dlq` and its subcommands."""
    dlq = sub.add_parser("dlq", help="redrive dead-letter queues")
    actions = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    redrive = actions.add_parser("redrive", help="move a DLQ's messages back to their source "
                                                 "queues (or --destination), with progress",
                                 epilog=examples("dmq dlq redrive orders-dlq",
                                                 "dmq dlq redrive orders-dlq --destination "
                                                 "orders-retry --rate 50 --no-wait"))
    redrive.add_argument("queue", help=f"the dead-letter queue: {QUEUE_HELP}")
    redrive.add_argument("--destination", help="move to this queue instead of the sources")
    redrive.add_argument("--rate", type=bounded_int(1, 500),
                         help="MaxNumberOfMessagesPerSecond, 1 to 500 (default: as fast as "
                              "the service goes)")
    redrive.add_argument("--timeout", type=non_negative, default=3600.0,
                         help="stop watching after this many seconds (default 3600)")
    redrive.add_argument("--no-wait", action="store_true",
                         help="start the task and print its handle, without watching")
    redrive.set_defaults(func=_redrive)
    tasks = actions.add_parser("tasks", help="a DLQ's recent move tasks (newest first)",
                               epilog=examples("dmq dlq tasks orders-dlq"))
    tasks.add_argument("queue", help=f"the dead-letter queue: {QUEUE_HELP}")
    tasks.set_defaults(func=_tasks)
    cancel = actions.add_parser("cancel", help="cancel a running move task",
                                epilog=examples("dmq dlq cancel TASK_HANDLE"))
    cancel.add_argument("task_handle")
    cancel.set_defaults(func=_cancel)
