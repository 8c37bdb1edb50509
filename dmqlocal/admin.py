"""The DMQ admin CLI: queues, message inspection, shards and clusters.

    python -m dmqlocal.admin queues
    python -m dmqlocal.admin show 000000000000/orders
    python -m dmqlocal.admin peek 000000000000/orders --limit 5
    python -m dmqlocal.admin shards 000000000000/orders 4
    python -m dmqlocal.admin split 000000000000/orders [--cluster c2]
    python -m dmqlocal.admin clusters
    python -m dmqlocal.admin capacity c2 100
    python -m dmqlocal.admin regions
    python -m dmqlocal.admin region down us-east-1     # simulate a region failure
    python -m dmqlocal.admin audit [--data-dir .dmq]   # the audits on local Spark
    python -m dmqlocal.admin keys list
    python -m dmqlocal.admin keys create 111122223333 [--user alice] [--admin]
    python -m dmqlocal.admin keys rotate AKIA...
    python -m dmqlocal.admin keys revoke AKIA...

`audit` runs the Spark audit jobs over the local data folder (see
`dmqlocal.audit`). Every other command calls the admin API of a running DMQ:
`--endpoint`, else `DMQ_ENDPOINT`, else the local server's default address
(`make admin ARGS=... PORT=...` passes the port `make run` was given).
Requests are signed with SigV4 for API Gateway (`execute-api`) when credentials
are available, which the deployed admin routes require.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from chalicelib.frontend.admin import MAX_PEEK
from chalicelib.service.shards import MAX_SHARDS
from dmqlocal import audit

DEFAULT_ENDPOINT = "http://127.0.0.1:9324"


def _signed_headers(url: str, region: str, method: str, body: bytes) -> dict[str, str]:
    credentials = boto3.session.Session().get_credentials()
    if credentials is None:
        return {}
    request = AWSRequest(method=method, url=url, data=body)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


def fetch(
    endpoint: str, path: str, region: str = "us-east-1", method: str = "GET",
    body: dict[str, Any] | None = None,
) -> Any:
    """Call an admin route and return its JSON; HTTP errors carry the server's message."""
    url = endpoint.rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else b""
    headers = _signed_headers(url, region, method, data)
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data if body is not None else None,
                                     headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise SystemExit(f"error {exc.code}: {detail}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SystemExit(
            f"cannot reach DMQ at {endpoint} ({reason}): start it with `make run`, or point "
            "--endpoint or DMQ_ENDPOINT at it (e.g. DMQ_ENDPOINT=http://127.0.0.1:PORT)"
        ) from None


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from low to high."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not from {low} to {high}")
        return value

    return parse


def _capacity(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def _queue_id(text: str) -> str:
    """An argparse type: <account>/<name>."""
    account, sep, name = text.partition("/")
    if not sep or not account or not name:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a queue is named <account>/<name>, e.g. 000000000000/orders")
    return text


def _queue_path(queue_id: str) -> str:
    account, _, name = _queue_id(queue_id).partition("/")
    return f"/admin/queues/{account}/{name}"


def _print_queues(data: dict[str, Any]) -> None:
    print(f"{'queue':50} {'shards':>6}  region")
    for queue in data["queues"]:
        print(f"{queue['queue_id']:50} {queue['shard_count']:>6}  {queue['region']}")


def _print_messages(data: dict[str, Any]) -> None:
    for message in data["messages"]:
        body = message["body"] + ("…" if message["body_truncated"] else "")
        print(f"{message['message_id']}  receives={message['receive_count']}  "
              f"sent_ms={message['sent_ms']}  visible_at={message['visible_at']}")
        print(f"    {body!r}")
    if not data["messages"]:
        print("(no messages)")


def _run(args: argparse.Namespace) -> Any:
    """Call the admin route behind a command."""
    call = functools.partial(fetch, args.endpoint, region=args.region)
    if args.command == "queues":
        return call("/admin/queues")
    if args.command == "show":
        return call(_queue_path(args.queue))
    if args.command == "peek":
        return call(f"{_queue_path(args.queue)}/messages?limit={args.limit}")
    if args.command == "shards":
        return call(f"{_queue_path(args.queue)}/shards", method="PUT",
                    body={"count": args.count})
    if args.command == "split":
        return call(f"{_queue_path(args.queue)}/split", method="POST",
                    body={"cluster": args.cluster} if args.cluster else {})
    if args.command == "capacity":
        return call(f"/admin/clusters/{args.cluster}", method="PUT",
                    body={"capacity": args.capacity})
    if args.command == "regions":
        return call("/admin/regions")
    if args.command == "region":
        return call(f"/admin/regions/{args.region}/{args.state}", method="POST", body={})
    if args.command == "keys":
        return _keys(call, args)
    return call("/admin/clusters")


def _keys(call: Callable[..., Any], args: argparse.Namespace) -> Any:
    """The access-key commands (the secret of a new key is printed once)."""
    if args.action == "list":
        return call("/admin/keys")
    if args.action == "create":
        return call("/admin/keys", method="POST",
                    body={"account": args.account, "user": args.user, "admin": args.admin})
    if args.action == "rotate":
        return call(f"/admin/keys/{args.key_id}/rotate", method="POST", body={})
    return call(f"/admin/keys/{args.key_id}", method="DELETE")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; bad arguments exit with a usage error (status 2)."""
    parser = argparse.ArgumentParser(prog="dmq-admin", description="DMQ admin commands.")
    parser.add_argument("--endpoint", default=os.environ.get("DMQ_ENDPOINT") or DEFAULT_ENDPOINT,
                        help=f"DMQ's URL (default $DMQ_ENDPOINT, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--json", action="store_true", help="print raw JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("queues", help="every queue of every account")
    show = sub.add_parser("show", help="one queue's metadata and counts")
    show.add_argument("queue", type=_queue_id, help="<account>/<name>")
    peek = sub.add_parser("peek", help="the oldest messages, read without receiving them")
    peek.add_argument("queue", type=_queue_id, help="<account>/<name>")
    peek.add_argument("--limit", type=_bounded_int(1, MAX_PEEK), default=10,
                      help=f"1 to {MAX_PEEK} (default 10)")
    shards = sub.add_parser("shards", help="scale a queue to COUNT shards (scale-in drains)")
    shards.add_argument("queue", type=_queue_id, help="<account>/<name>")
    shards.add_argument("count", type=_bounded_int(1, MAX_SHARDS), help=f"1 to {MAX_SHARDS}")
    split = sub.add_parser("split", help="spread a hot queue onto a second cluster "
                                         "(needs DMQ_CLUSTERS on the server)")
    split.add_argument("queue", type=_queue_id, help="<account>/<name>")
    split.add_argument("--cluster", default=None, help="default: the placement ring's choice")
    sub.add_parser("clusters", help="every cluster's capacity, utilization and queues")
    capacity = sub.add_parser("capacity", help="set a cluster's capacity (active shards; "
                                               "clusters other than default need DMQ_CLUSTERS)")
    capacity.add_argument("cluster")
    capacity.add_argument("capacity", type=_capacity)
    sub.add_parser("regions", help="regions: health, heartbeats, home queues, replication lag")
    region = sub.add_parser("region", help="mark a region down or up (local simulation)")
    region.add_argument("state", choices=("down", "up", "tick"))
    region.add_argument("region")
    keys = sub.add_parser("keys", help="access keys: list, create, rotate, revoke")
    key_actions = keys.add_subparsers(dest="action", required=True)
    key_actions.add_parser("list", help="every access key (never a secret)")
    create = key_actions.add_parser("create", help="a new key; its secret is shown once")
    create.add_argument("account", help="the 12-digit account the key belongs to")
    create.add_argument("--user", default=None, help="a named user (default: the root)")
    create.add_argument("--admin", action="store_true", help="may call the admin API")
    for action, text in (("rotate", "a new key pair for the same principal"),
                         ("revoke", "revoke a key")):
        key_actions.add_parser(action, help=text).add_argument("key_id")
    audit_parser = sub.add_parser("audit", help="run the Spark audits over the local archive")
    audit.add_arguments(audit_parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one admin command."""
    args = parse_args(argv)
    if args.command == "audit":
        return audit.run(args)
    data = _run(args)
    if args.json or args.command not in ("queues", "peek"):
        print(json.dumps(data, indent=2, sort_keys=True))
    elif args.command == "queues":
        _print_queues(data)
    else:
        _print_messages(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
