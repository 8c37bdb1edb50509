"""Confirmation before a command that deletes data: asked on a terminal, `--yes` (`-y`)
in scripts. Without a terminal to ask on and without `--yes`, the command is refused."""

from __future__ import annotations

import argparse
import sys

from dmqcli.errors import USAGE, Cancelled, CliError

YES_HELP = "do it without asking (required when stdin is not a terminal)"


def add_yes(parser: argparse.ArgumentParser) -> None:
    """Add `--yes`/`-y` to a command that deletes data."""
    parser.add_argument("--yes", "-y", action="store_true", help=YES_HELP)


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stdin
        return False


def confirm(args: argparse.Namespace, question: str, doing: str) -> None:
    """Return when `--yes` was given or the user answers y; raise otherwise. `doing`
    names the act for the refusal, e.g. "purging 'orders'"."""
    if getattr(args, "yes", False):
        return
    if not _interactive():
        raise CliError(f"{doing} needs confirmation and stdin is not a terminal to ask on: "
                       "pass --yes", USAGE)
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise Cancelled("nothing was done")
