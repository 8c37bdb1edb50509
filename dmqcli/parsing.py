"""The command line's building blocks: a parser whose errors are one line (exit 2), and
the argument types the commands share."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from dmqcli.errors import USAGE


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error printed as one line and exit status 2, and epilogs
    (the examples) printed as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(USAGE)


def examples(*lines: str) -> str:
    """An epilog of example command lines."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argument type: an integer from low to high."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not from {low} to {high}")
        return value

    parse.__name__ = "integer"
    return parse


def non_negative(text: str) -> float:
    """An argument type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number >= 0")
    return value


def key_value(text: str) -> tuple[str, str]:
    """An argument type: KEY=VALUE."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def pairs(items: list[tuple[str, str]] | None) -> dict[str, str]:
    """Repeated KEY=VALUE arguments as a dict (the last one of a key wins)."""
    return dict(items or [])
