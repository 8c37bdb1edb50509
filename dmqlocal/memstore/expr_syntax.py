"""The syntax of expressions: document paths as written, the tree nodes the parser builds
(operands, conditions and update actions), and the tokenizer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from dmqlocal.memstore.expr_values import ExpressionError

Step = str | int  # an attribute name, a "#placeholder" or a list index
Resolved = tuple[Step, ...]  # a document path with its placeholders replaced

_TOKEN = re.compile(
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<hash>#[A-Za-z0-9_]+)|(?P<colon>:[A-Za-z0-9_]+)"
    r"|(?P<int>[0-9]+)|(?P<op><>|<=|>=|[=<>(),.\[\]+\-])")
_TOKEN_KINDS = {"name": "name", "hash": "#", "colon": ":", "int": "int", "op": "op"}


# ---------------------------------------------------------------------------------------
# The parsed trees


@dataclass(frozen=True, slots=True)
class Path:
    """A document path as written: names, "#placeholders" and list indexes."""

    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class ValueRef:
    """A ":placeholder" for an ExpressionAttributeValues entry."""

    ref: str


@dataclass(frozen=True, slots=True)
class Call:
    """A function call: a condition function, size(), if_not_exists() or list_append()."""

    name: str
    args: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Arith:
    """`a + b` or `a - b` in a SET action."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Compare:
    """A comparison with = <> < <= > >=."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, slots=True)
class Between:
    """`subject BETWEEN low AND high`."""

    subject: Operand
    low: Operand
    high: Operand


@dataclass(frozen=True, slots=True)
class In:
    """`subject IN (option, ...)`."""

    subject: Operand
    options: tuple[Operand, ...]


@dataclass(frozen=True, slots=True)
class Logic:
    """AND or OR of two conditions."""

    op: str
    left: Cond
    right: Cond


@dataclass(frozen=True, slots=True)
class Not:
    """NOT of a condition."""

    inner: Cond


Operand = Path | ValueRef | Call | Arith
Cond = Compare | Between | In | Call | Logic | Not


@dataclass(frozen=True, slots=True)
class Action:
    """One update action: SET path = value, REMOVE path, ADD path :v or DELETE path :v."""

    clause: str
    path: Path
    value: Operand | None


# ---------------------------------------------------------------------------------------
# Tokens


class Token(NamedTuple):
    """One token: kind is "name", "#", ":", "int", "op" or "eof"."""

    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str, label: str) -> list[Token]:
    """The tokens of an expression, ending with an "eof" token."""
    tokens: list[Token] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos].isspace():
            pos += 1
        if pos >= size:
            tokens.append(Token("eof", "<EOF>", size, size))
            return tokens
        found = _TOKEN.match(text, pos)
        if found is None:
            start = tokens[-1].start if tokens else pos
            raise ExpressionError(f'Invalid {label}: Syntax error; token: "{text[pos]}", '
                                  f'near: "{text[start:pos + 1]}"')
        kind = _TOKEN_KINDS[found.lastgroup or "op"]
        tokens.append(Token(kind, found.group(), pos, found.end()))
        pos = found.end()
