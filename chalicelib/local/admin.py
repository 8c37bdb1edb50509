"""The DMQ admin CLI: list every queue, describe one, and inspect its messages.

    python -m chalicelib.local.admin queues
    python -m chalicelib.local.admin show 000000000000/orders
    python -m chalicelib.local.admin peek 000000000000/orders --limit 5

It calls the admin API of a running DMQ (`--endpoint`, default the local server).
Requests are signed with SigV4 for API Gateway (`execute-api`) when credentials
are available, which the deployed admin routes require.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

DEFAULT_ENDPOINT = "http://127.0.0.1:9324"


def _signed_headers(url: str, region: str) -> dict[str, str]:
    credentials = boto3.session.Session().get_credentials()
    if credentials is None:
        return {}
    request = AWSRequest(method="GET", url=url)
    SigV4Auth(credentials.get_frozen_credentials(), "execute-api", region).add_auth(request)
    return dict(request.headers.items())


def fetch(endpoint: str, path: str, region: str = "us-east-1") -> Any:
    """GET an admin route and return its JSON; HTTP errors carry the server's message."""
    url = endpoint.rstrip("/") + path
    request = urllib.request.Request(url, headers=_signed_headers(url, region))
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise SystemExit(f"error {exc.code}: {detail}") from exc


def _queue_path(queue_id: str) -> str:
    account, sep, name = queue_id.partition("/")
    if not sep or not account or not name:
        raise SystemExit("a queue is named <account>/<name>, e.g. 000000000000/orders")
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


def main(argv: list[str] | None = None) -> int:
    """Run one admin command."""
    parser = argparse.ArgumentParser(prog="dmq-admin", description="DMQ admin commands.")
    parser.add_argument("--endpoint", default=DEFAULT_ENDPOINT)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--json", action="store_true", help="print raw JSON")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("queues", help="every queue of every account")
    show = sub.add_parser("show", help="one queue's metadata and counts")
    show.add_argument("queue", help="<account>/<name>")
    peek = sub.add_parser("peek", help="the oldest messages, read without receiving them")
    peek.add_argument("queue", help="<account>/<name>")
    peek.add_argument("--limit", type=int, default=10)
    args = parser.parse_args(argv)
    if args.command == "queues":
        data = fetch(args.endpoint, "/admin/queues", args.region)
    elif args.command == "show":
        data = fetch(args.endpoint, _queue_path(args.queue), args.region)
    else:
        data = fetch(args.endpoint, f"{_queue_path(args.queue)}/messages?limit={args.limit}",
                     args.region)
    if args.json or args.command == "show":
        print(json.dumps(data, indent=2, sort_keys=True))
    elif args.command == "queues":
        _print_queues(data)
    else:
        _print_messages(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
