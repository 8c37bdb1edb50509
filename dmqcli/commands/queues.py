"""`dmq queues list|describe|create|delete|purge`: the SQS API's queue actions, and the
admin view of every account's queues."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.confirm import add_yes, confirm
from dmqcli.context import Context
from dmqcli.output import iso_s
from dmqcli.parsing import examples, key_value, pairs

TIMES_S = ("CreatedTimestamp", "LastModifiedTimestamp")  # epoch seconds, as SQS gives them


def _list(ctx: Context, args: argparse.Namespace) -> None:
    if args.all_accounts:
        data = ctx.admin.get("/admin/queues")
        ctx.output.table(data, ("queue", "region", "shards", "arn"),
                         ((q["queue_id"], q["region"], q["shard_count"], q["arn"])
                          for q in data["queues"]), empty="(no queues)")
        return
    urls: list[str] = []
    params: dict[str, Any] = {"MaxResults": 1000}
    if args.prefix:
        params["QueueNamePrefix"] = args.prefix
    for page in ctx.sqs.get_paginator("list_queues").paginate(**params):
        urls += page.get("QueueUrls", [])
    ctx.output.table({"QueueUrls": urls}, ("name", "url"),
                     ((url.rstrip("/").rsplit("/", 1)[-1], url) for url in urls),
                     empty="(no queues)")


def _describe(ctx: Context, args: argparse.Namespace) -> None:
    ref = ctx.queue(args.queue)
    attributes = ctx.sqs.get_queue_attributes(QueueUrl=ref.url, AttributeNames=["All"])
    tags = ctx.sqs.list_queue_tags(QueueUrl=ref.url).get("Tags", {})
    data = {"QueueUrl": ref.url, "Attributes": attributes.get("Attributes", {}), "Tags": tags}
    attributes = {k: iso_s(v) if k in TIMES_S else v for k, v in data["Attributes"].items()}
    rows = [("QueueUrl", ref.url), *sorted(attributes.items()),
            *((f"tag:{k}", v) for k, v in sorted(tags.items()))]
    ctx.output.table(data, ("field", "value"), rows, title=ref.name)


def _create(ctx: Context, args: argparse.Namespace) -> None:
    attributes = pairs(args.attribute)
    if args.name.endswith(".fifo"):
        attributes.setdefault("FifoQueue", "true")
    if args.cluster:
        attributes["DmqCluster"] = args.cluster
    params: dict[str, Any] = {"QueueName": args.name, "Attributes": attributes}
    if args.tag:
        params["tags"] = pairs(args.tag)
    url = ctx.sqs.create_queue(**params)["QueueUrl"]
    ctx.output.fields({"QueueUrl": url})


def _delete(ctx: Context, args: argparse.Namespace) -> None:
    confirm(args, f"Delete queue '{args.queue}' and all its messages?",
            f"deleting queue '{args.queue}'")
    ref = ctx.queue(args.queue)
    ctx.sqs.delete_queue(QueueUrl=ref.url)
    ctx.output.fields({"QueueUrl": ref.url, "deleted": True})


def _purge(ctx: Context, args: argparse.Namespace) -> None:
    confirm(args, f"Purge all messages of '{args.queue}'?", f"purging '{args.queue}'")
    ref = ctx.queue(args.queue)
    ctx.sqs.purge_queue(QueueUrl=ref.url)
    ctx.output.fields({"QueueUrl": ref.url, "purged": True})


QUEUE_HELP = "a queue URL, ARN, <account>/<name>, or the name of one of your queues"


def register(sub: Any) -> None:
    """Add `queues` and its subcommands."""
    queues = sub.add_parser("queues", help="list, describe, create, delete and purge queues")
    actions = queues.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="your queues (ListQueues), or every account's",
                                 epilog=examples("dmq queues list --prefix orders",
                                                 "dmq queues list --all-accounts --json"))
    listing.add_argument("--prefix", help="only names starting with this (QueueNamePrefix)")
    listing.add_argument("--all-accounts", action="store_true",
                         help="every queue of every account, from the admin API")
    listing.set_defaults(func=_list)
    describe = actions.add_parser("describe", help="every attribute and tag of a queue",
                                  epilog=examples("dmq queues describe orders",
                                                  "dmq queues describe 111122223333/orders"))
    describe.add_argument("queue", help=QUEUE_HELP)
    describe.set_defaults(func=_describe)
    create = actions.add_parser("create", help="create a queue (a .fifo name makes it FIFO)",
                                epilog=examples(
                                    "dmq queues create orders -a VisibilityTimeout=60 "
                                    "-t team=ops",
                                    "dmq queues create jobs.fifo -a "
                                    "ContentBasedDeduplication=true",
                                    "dmq queues create bulk --cluster c2"))
    create.add_argument("name")
    create.add_argument("--attribute", "-a", action="append", type=key_value, metavar="K=V",
                        help="a queue attribute, e.g. VisibilityTimeout=60 (repeatable)")
    create.add_argument("--tag", "-t", action="append", type=key_value, metavar="K=V",
                        help="a tag (repeatable)")
    create.add_argument("--cluster", help="the cluster to place it on (the DmqCluster "
                                          "attribute; default: the server's choice)")
    create.set_defaults(func=_create)
    _add_deletes(actions)


def _add_deletes(actions: Any) -> None:
    """Add `queues delete` and `queues purge`, which ask first (or take --yes)."""
    delete = actions.add_parser("delete", help="delete a queue and its messages (asks first)",
                                epilog=examples("dmq queues delete orders",
                                                "dmq queues delete orders --yes"))
    delete.add_argument("queue", help=QUEUE_HELP)
    add_yes(delete)
    delete.set_defaults(func=_delete)
    purge = actions.add_parser("purge", help="delete every message of a queue (asks first)",
                               epilog=examples("dmq queues purge orders",
                                               "dmq queues purge orders --yes"))
    purge.add_argument("queue", help=QUEUE_HELP)
    add_yes(purge)
    purge.set_defaults(func=_purge)
