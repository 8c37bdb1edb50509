"""The global options, which may go anywhere on the command line: before the command,
after it, or among its own arguments (`dmq queues list --endpoint URL --json`).

They are moved in front of the command before argparse reads the line, so argparse sees
them where its top-level parser takes them; everything after `--` stays where it is.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dmqcli.discovery import DEFAULT_ENDPOINT

VALUED = ("--endpoint", "--endpoint-url", "--profile", "--region")
SWITCHES = ("--json",)


class MissingValue(ValueError):
    """A global option that takes a value came without one."""

    def __init__(self, flag: str) -> None:
        super().__init__(f"argument {flag}: expected one argument")


def _is_value(token: str) -> bool:
    return not token.startswith("-") or token == "-"


def hoist(argv: Sequence[str]) -> list[str]:
    """The command line with the global options moved, in order, in front of the rest."""
    front: list[str] = []
    rest: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, equals, _ = token.partition("=")
        if token == "--":
            rest += tokens[i:]
            break
        if token in SWITCHES or (name in VALUED and equals):
            front.append(token)
        elif token in VALUED:
            if i + 1 >= len(tokens) or not _is_value(tokens[i + 1]):
                raise MissingValue(token)
            front += tokens[i:i + 2]
            i += 1
        else:
            rest.append(token)
        i += 1
    return front + rest


def add_global_options(parser: argparse.ArgumentParser, shown_only: bool = False) -> None:
    """The global options; `shown_only` for a command's own parser, where they appear in
    its help (and completion) but are never read: they were moved to the front."""
    default = argparse.SUPPRESS if shown_only else None
    group = parser.add_argument_group("global options (anywhere on the line)")
    group.add_argument("--endpoint", "--endpoint-url", dest="endpoint", metavar="URL",
                       default=default,
                       help="DMQ's URL (default: $DMQ_ENDPOINT, else the running local "
                            f"server's address from its server.json, else {DEFAULT_ENDPOINT})")
    group.add_argument("--profile", default=default, metavar="NAME",
                       help="the AWS profile whose credentials sign requests")
    group.add_argument("--region", default=default, metavar="REGION",
                       help="the region to sign for (default: the profile's or "
                            "AWS_DEFAULT_REGION, else us-east-1)")
    group.add_argument("--json", action="store_true",
                       default=argparse.SUPPRESS if shown_only else False,
                       help="print JSON for scripts (raw values: times in epoch ms)")
