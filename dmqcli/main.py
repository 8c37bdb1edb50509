"""`dmq`: the command line, and the one place that turns failures into a line and a status.

    dmq [--endpoint URL] [--profile NAME] [--region REGION] [--json] GROUP ACTION ...

Exit status: 0 done; 1 the service or the connection failed (or an audit found a lost
message); 2 the command line or the local configuration is wrong.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from dmqcli.commands import (
    clusters,
    data,
    dlq,
    keys,
    messages,
    queues,
    regions,
    stats,
    subscriptions,
)
from dmqcli.context import DEFAULT_ENDPOINT, Context, default_endpoint
from dmqcli.errors import SERVICE, CliError, from_botocore
from dmqcli.parsing import Parser

GROUPS = (queues, messages, stats, dlq, subscriptions, keys, regions, clusters, data)
INTERRUPTED = 130


def build_parser() -> Parser:
    """Every option and subcommand."""
    parser = Parser(prog="dmq", description="Operate DMQ: queues, messages, DLQ redrives, "
                    "push subscriptions, keys, regions, clusters, exports and audits.")
    parser.add_argument("--endpoint", default=default_endpoint(),
                        help=f"DMQ's URL (default $DMQ_ENDPOINT, else {DEFAULT_ENDPOINT})")
    parser.add_argument("--profile", help="the AWS profile whose credentials sign requests")
    parser.add_argument("--region", help="the region to sign for (default: the profile's or "
                        "AWS_DEFAULT_REGION, else us-east-1)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("--version", action="version", version=f"dmq {_version()}")
    sub = parser.add_subparsers(dest="group", required=True, metavar="COMMAND",
                                parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    for leaf in _leaves(parser):
        if leaf is not parser:  # `--json` also after the command, where scripts put it
            leaf.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                              help="print JSON for scripts")
    return parser


def _version() -> str:
    """The installed project's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dmq")
    except PackageNotFoundError:
        return "(not installed: run from the source tree)"


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of the commands that run something (those without subcommands)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    return [leaf for action in subs for child in action.choices.values()
            for leaf in _leaves(child)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; a mistake ends with one line on stderr and status 2."""
    return build_parser().parse_args(argv)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; failures are raised as CliError."""
    from botocore.exceptions import BotoCoreError, ClientError

    ctx = Context(args.endpoint, args.profile, args.region, args.json)
    func: Callable[[Context, argparse.Namespace], Any] = args.func
    try:
        status = func(ctx, args)
    except (ClientError, BotoCoreError) as exc:
        raise from_botocore(exc, ctx.endpoint) from None
    return status if isinstance(status, int) else 0


def main(argv: list[str] | None = None) -> int:
    """The `dmq` console script."""
    args = parse_args(argv)
    try:
        return run(args)
    except CliError as exc:
        print(f"dmq: error: {exc.message}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("dmq: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return SERVICE


if __name__ == "__main__":
    sys.exit(main())
