"""`dmq messages peek|send|receive`: read a queue without claiming its messages (the admin
API), send a test message, and receive (optionally deleting what was received)."""

from __future__ import annotations

import argparse
from typing import Any

from dmqcli.commands.queues import QUEUE_HELP
from dmqcli.context import Context
from dmqcli.errors import CliError
from dmqcli.output import iso_ms
from dmqcli.parsing import bounded_int, examples, key_value

MAX_PEEK = 100  # the admin API's limit (chalicelib.frontend.admin.MAX_PEEK)
PREVIEW_CHARS = 60


def _preview(body: str) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS - 1] + "…"


def _peek(ctx: Context, args: argparse.Namespace) -> None:
    data = ctx.admin.get(f"{ctx.admin_path(args.queue)}/messages", {"limit": str(args.limit)})
    ctx.output.table(
        data, ("message id", "receives", "sent", "visible at", "body"),
        ((m["message_id"], m["receive_count"], iso_ms(m["sent_ms"]), iso_ms(m["visible_at"]),
          _preview(m["body"]) + ("…" if m["body_truncated"] else ""))
         for m in data["messages"]),
        title=data["queue_id"], empty="(no messages)")


def _attributes(items: list[tuple[str, str]] | None) -> dict[str, Any]:
    """NAME=VALUE (a String) or NAME=Type:VALUE (Number, Binary is not offered here)."""
    out: dict[str, Any] = {}
    for name, text in items or []:
        kind, sep, value = text.partition(":")
        if not sep or kind.split(".")[0] not in ("String", "Number"):
            kind, value = "String", text
        out[name] = {"DataType": kind, "StringValue": value}
    return out


def _send(ctx: Context, args: argparse.Namespace) -> None:
    ref = ctx.queue(args.queue)
    params: dict[str, Any] = {"QueueUrl": ref.url, "MessageBody": args.body}
    if args.delay is not None:
        params["DelaySeconds"] = args.delay
    if args.group_id:
        params["MessageGroupId"] = args.group_id
    if args.deduplication_id:
        params["MessageDeduplicationId"] = args.deduplication_id
    if args.attribute:
        params["MessageAttributes"] = _attributes(args.attribute)
    result = ctx.sqs.send_message(**params)
    result.pop("ResponseMetadata", None)
    ctx.output.fields(result)


def _receive(ctx: Context, args: argparse.Namespace) -> None:
    ref = ctx.queue(args.queue)
    params: dict[str, Any] = {"QueueUrl": ref.url, "MaxNumberOfMessages": args.max,
                              "WaitTimeSeconds": args.wait, "MessageSystemAttributeNames": ["All"],
                              "MessageAttributeNames": ["All"]}
    if args.visibility_timeout is not None:
        params["VisibilityTimeout"] = args.visibility_timeout
    messages = ctx.sqs.receive_message(**params).get("Messages", [])
    if args.delete and messages:
        result = ctx.sqs.delete_message_batch(QueueUrl=ref.url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
        failed = result.get("Failed", [])
        if failed:
            raise CliError(f"{len(failed)} of {len(messages)} received messages were not "
                           f"deleted: {failed[0].get('Code')}: {failed[0].get('Message')}")
    ctx.output.table(
        {"Messages": messages, "Deleted": bool(args.delete)},
        ("message id", "receives", "body"),
        ((m["MessageId"], m.get("Attributes", {}).get("ApproximateReceiveCount"),
          _preview(m["Body"])) for m in messages),
        empty="(no messages)")


def register(sub: Any) -> None:
    """Add `messages` and its subcommands."""
    messages = sub.add_parser("messages", help="peek at, send and receive messages")
    actions = messages.add_subparsers(dest="action", required=True, metavar="ACTION")
    peek = actions.add_parser("peek", help="the oldest messages, read without receiving them "
                                           "(no receive is counted, nothing is hidden)",
                              epilog=examples("dmq messages peek orders --limit 20",
                                              "dmq messages peek 111122223333/orders --json"))
    peek.add_argument("queue", help=QUEUE_HELP)
    peek.add_argument("--limit", type=bounded_int(1, MAX_PEEK), default=10,
                      help=f"1 to {MAX_PEEK} (default 10)")
    peek.set_defaults(func=_peek)
    send = actions.add_parser("send", help="send one message", epilog=examples(
        "dmq messages send orders 'hello' -a kind=test -a n=Number:3",
        "dmq messages send jobs.fifo 'step 1' --group-id g1 --deduplication-id s1"))
    send.add_argument("queue", help=QUEUE_HELP)
    send.add_argument("body")
    send.add_argument("--delay", type=bounded_int(0, 900), help="DelaySeconds, 0 to 900")
    send.add_argument("--group-id", help="MessageGroupId (FIFO queues, fair queues)")
    send.add_argument("--deduplication-id", help="MessageDeduplicationId (FIFO queues)")
    send.add_argument("--attribute", "-a", action="append", type=key_value,
                      metavar="NAME=[Type:]VALUE",
                      help="a message attribute: a String, or Number:42 (repeatable)")
    send.set_defaults(func=_send)
    receive = actions.add_parser("receive", help="receive messages (they become invisible "
                                                 "for the visibility timeout)",
                                 epilog=examples("dmq messages receive orders --max 10 --wait 5",
                                                 "dmq messages receive orders --delete --json"))
    receive.add_argument("queue", help=QUEUE_HELP)
    receive.add_argument("--max", type=bounded_int(1, 10), default=1,
                         help="MaxNumberOfMessages, 1 to 10 (default 1)")
    receive.add_argument("--wait", type=bounded_int(0, 20), default=0,
                         help="WaitTimeSeconds, 0 to 20 (default 0)")
    receive.add_argument("--visibility-timeout", type=bounded_int(0, 43200),
                         help="VisibilityTimeout for these messages, 0 to 43200")
    receive.add_argument("--delete", action="store_true",
                         help="delete the messages once received")
    receive.set_defaults(func=_receive)

