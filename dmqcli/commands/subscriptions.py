"""`dmq subscriptions list|create|delete`: a queue's push subscribers (HTTP(S) endpoints or
functions of the deployment that DMQ hands the queue's messages to; docs/push.md), through
the admin API's `/admin/queues/{account}/{name}/subscriptions` routes.

The service checks every value (with Lambda's CreateEventSourceMapping limits and wording);
options left out are not sent, so the service's defaults apply."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.admin_api import quote
from dmqcli.commands.queues import QUEUE_HELP
from dmqcli.confirm import add_yes, confirm
from dmqcli.context import Context
from dmqcli.output import iso_ms
from dmqcli.parsing import examples

COLUMNS = ("uuid", "target", "batch size", "window s", "report failures", "max concurrency",
           "state", "modified")


def target(sub: dict[str, Any]) -> str:
    """Where a subscription delivers: its endpoint URL, or `function:<name>`."""
    if "Endpoint" in sub:
        return str(sub["Endpoint"])
    return f"function:{sub.get('FunctionName', '')}"


def _row(sub: dict[str, Any]) -> tuple[Any, ...]:
    return (sub.get("UUID"), target(sub), sub.get("BatchSize"),
            sub.get("MaximumBatchingWindowInSeconds"),
            "ReportBatchItemFailures" in (sub.get("FunctionResponseTypes") or []),
            (sub.get("ScalingConfig") or {}).get("MaximumConcurrency"), sub.get("State"),
            iso_ms(sub.get("LastModified")))


def create_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST body: the target and only the options given."""
    body: dict[str, Any] = ({"Endpoint": args.url} if args.url is not None
                            else {"FunctionName": args.function})
    if args.batch_size is not None:
        body["BatchSize"] = args.batch_size
    if args.window is not None:
        body["MaximumBatchingWindowInSeconds"] = args.window
    if args.report_batch_item_failures:
        body["FunctionResponseTypes"] = ["ReportBatchItemFailures"]
    if args.max_concurrency is not None:
        body["ScalingConfig"] = {"MaximumConcurrency": args.max_concurrency}
    if args.disabled:
        body["Enabled"] = False
    return body


def _list(ctx: Context, args: argparse.Namespace) -> None:
    data = ctx.admin.get(f"{ctx.admin_path(args.queue)}/subscriptions")
    subs = data["subscriptions"]
    ctx.output.table(data, COLUMNS, (_row(s) for s in subs),
                     title=f"subscriptions of {data.get('queue_id', args.queue)}",
                     empty="(no subscriptions)")


def _create(ctx: Context, args: argparse.Namespace) -> None:
    created = ctx.admin.post(f"{ctx.admin_path(args.queue)}/subscriptions", create_body(args))
    ctx.output.fields(created, title="subscription created", times_ms=("LastModified",))


def _delete(ctx: Context, args: argparse.Namespace) -> None:
    confirm(args, f"Delete subscription {args.uuid} of '{args.queue}'? Its deliveries stop.",
            f"deleting subscription {args.uuid}")
    path = f"{ctx.admin_path(args.queue)}/subscriptions/{quote(args.uuid)}"
    ctx.output.fields(ctx.admin.delete(path), title="subscription deleted",
                      times_ms=("LastModified",))


def register(sub: Any) -> None:
    """Add `subscriptions` and its subcommands."""
    group = sub.add_parser("subscriptions", help="push subscribers of a queue (HTTP(S) "
                                                 "endpoints or functions DMQ delivers to)")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="a queue's subscriptions",
                                 epilog=examples("dmq subscriptions list orders",
                                                 "dmq subscriptions list orders --json"))
    listing.add_argument("queue", help=QUEUE_HELP)
    listing.set_defaults(func=_list)
    _add_create(actions)
    delete = actions.add_parser("delete", help="unsubscribe: delivery to it stops (asks first)",
                                epilog=examples("dmq subscriptions delete orders UUID --yes"))
    delete.add_argument("queue", help=QUEUE_HELP)
    delete.add_argument("uuid", help="the subscription's UUID (see `subscriptions list`)")
    add_yes(delete)
    delete.set_defaults(func=_delete)


def _add_create(actions: Any) -> None:
    """Add `subscriptions create`: the target and the options the service checks."""
    create = actions.add_parser(
        "create", help="subscribe an endpoint or a function to a queue (the service checks "
                       "the values; options left out take its defaults)",
        epilog=examples("dmq subscriptions create orders --url http://127.0.0.1:8080/hook",
                        "dmq subscriptions create orders --function worker --batch-size 50 "
                        "--window 2 --report-batch-item-failures"))
    create.add_argument("queue", help=QUEUE_HELP)
    to = create.add_mutually_exclusive_group(required=True)
    to.add_argument("--url", metavar="URL",
                    help="POST each batch, as Lambda's SQS event, to this http(s) URL")
    to.add_argument("--function", metavar="NAME",
                    help="call this function registered in the deployment")
    create.add_argument("--batch-size", type=int, metavar="N",
                        help="messages per batch, 1 to 10,000 (at most 10 on a FIFO queue; "
                             "above 10 needs --window); default 10")
    create.add_argument("--window", type=int, metavar="SECONDS",
                        help="MaximumBatchingWindowInSeconds, 0 to 300: how long a batch "
                             "gathers messages; default 0")
    create.add_argument("--report-batch-item-failures", action="store_true",
                        help="the answer's batchItemFailures name the messages that failed "
                             "(the others are deleted)")
    create.add_argument("--max-concurrency", type=int, metavar="N",
                        help="at most N batches in flight at once, 2 to 1,000; default: no "
                             "cap beyond the delivering processes' workers")
    create.add_argument("--disabled", action="store_true",
                        help="create it disabled (nothing is delivered)")
    create.set_defaults(func=_create)
