# PYTHON_ARGCOMPLETE_OK (shell completion: see docs/cli.md)
"""`dmq`: the command line, and the one place that turns failures into a line and a status.

    dmq GROUP ACTION ... [--endpoint URL] [--profile NAME] [--region REGION] [--json]

Exit status: 0 done; 1 the service or the connection failed (or an audit found a lost
message, or a confirmation was declined); 2 the command line or the local configuration
is wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dmqcli.argv import MissingValue, add_global_options, hoist
from dmqcli.commands import (
    clusters,
    config,
    data,
    dlq,
    keys,
    messages,
    queues,
    regions,
    stats,
    subscriptions,
)
from dmqcli.context import Context
from dmqcli.discovery import resolve
from dmqcli.errors import SERVICE, CliError, from_botocore
from dmqcli.parsing import Parser, examples
from dmqcli.settings import CliSettings

GROUPS = (queues, messages, stats, dlq, subscriptions, keys, regions, clusters, data, config)
INTERRUPTED = 130
EPILOG = examples(
    "dmq queues list                         # the local server, found by itself",
    "dmq queues create orders -a VisibilityTimeout=60",
    "dmq messages peek orders --json",
    "dmq queues purge orders --yes           # asks first on a terminal",
    "dmq queues list --endpoint https://ID.execute-api.eu-west-1.amazonaws.com/api "
    "--profile ops",
) + """

The global options go anywhere on the line. The endpoint is --endpoint (or --endpoint-url),
else $DMQ_ENDPOINT, else the address the running local server wrote to its data folder
($DMQ_DATA_DIR, default .dmq: server.json), else http://127.0.0.1:9324 (`dmq config`
shows which). Requests are signed with the AWS CLI's credentials (environment, --profile,
~/.aws); a local server in the open mode needs none.

exit status: 0 done; 1 the service or the connection failed; 2 the command line or the
local configuration is wrong."""


def build_parser() -> Parser:
    """Every option and subcommand."""
    parser = Parser(prog="dmq", allow_abbrev=False, epilog=EPILOG,
                    description="Operate DMQ: queues, messages, DLQ redrives, push "
                                "subscriptions, keys,\nregions, clusters, exports and audits.")
    add_global_options(parser)
    parser.add_argument("--version", action="version", version=f"dmq {_version()}")
    sub = parser.add_subparsers(dest="group", required=True, metavar="COMMAND",
                                parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    for child in sub.choices.values():
        for command in {child, *_leaves(child)}:
            add_global_options(command, shown_only=True)
        if child.epilog is None:
            child.epilog = _group_examples(child)
    return parser


def _version() -> str:
    """The installed project's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dmq")
    except PackageNotFoundError:
        return "(not installed: run from the source tree)"


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [child for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for child in action.choices.values()]


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of the commands that run something (those without subcommands)."""
    children = _subparsers(parser)
    if not children:
        return [parser]
    return [leaf for child in children for leaf in _leaves(child)]


def _group_examples(group: argparse.ArgumentParser) -> str | None:
    """A group's examples: the first of each of its commands'."""
    lines = [leaf.epilog.splitlines()[1].strip() for leaf in _subparsers(group)
             if leaf.epilog and leaf.epilog.startswith("examples:")]
    return examples(*lines) if lines else None


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request, when this run is one (argcomplete)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; a mistake ends with one line on stderr and status 2."""
    parser = build_parser()
    _complete(parser)
    tokens = sys.argv[1:] if argv is None else argv
    try:
        hoisted = hoist(tokens)
    except MissingValue as exc:
        parser.error(str(exc))
    return parser.parse_args(hoisted)


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; failures are raised as CliError."""
    from botocore.exceptions import BotoCoreError, ClientError

    target = resolve(args.endpoint, CliSettings.from_env())
    ctx = Context(target, args.profile, args.region, args.json)
    func: Callable[[Context, argparse.Namespace], Any] = args.func
    try:
        status = func(ctx, args)
    except (ClientError, BotoCoreError) as exc:
        raise ctx.explain(from_botocore(exc, target.url, target.connect_hint())) from None
    except CliError as exc:
        raise ctx.explain(exc) from None
    return status if isinstance(status, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """The `dmq` console script."""
    args = parse_args(argv)
    try:
        return run(args)
    except CliError as exc:
        print(f"dmq: {exc.label}: {exc.message}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("dmq: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return SERVICE


if __name__ == "__main__":
    sys.exit(main())
