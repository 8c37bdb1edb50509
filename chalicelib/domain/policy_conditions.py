"""Condition blocks of access policies: IAM's operators, and whether a block holds for the
context of a request (the condition keys it brings, such as aws:SourceArn or aws:SourceIp).

Also the wildcard matching (`like`) that StringLike, ArnLike and the Action and Resource
elements share.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

ContextValue = str | int | float | bool | Sequence[str]
Context = Mapping[str, ContextValue]
Compare = Callable[[str, str], bool]


def as_list(value: Any) -> list[Any]:
    """A policy element that is one value or a list of them, as a list."""
    return list(value) if isinstance(value, list) else [value]


def like(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """Wildcard match of a whole value: `*` matches any run of characters, `?` any one
    character, nothing else is special. Greedy with one backtrack point, so the time is
    bounded by len(pattern) * len(value) whatever the pattern (no regex backtracking)."""
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    p = v = 0
    star, mark = -1, 0
    while v < len(value):
        if p < len(pattern) and pattern[p] in ("?", value[v]) and pattern[p] != "*":
            p, v = p + 1, v + 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, v, p + 1
        elif star >= 0:
            mark += 1
            p, v = star + 1, mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _numeric(test: Callable[[Decimal, Decimal], bool]) -> Compare:
    def compare(value: str, wanted: str) -> bool:
        a, b = _number(value), _number(wanted)
        return a is not None and b is not None and test(a, b)
    return compare


def parse_date(text: str) -> datetime | None:
    """An ISO 8601 date or time, or epoch seconds, as IAM accepts them."""
    text = str(text).strip()
    number = _number(text)
    if number is not None and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", text):
        return datetime.fromtimestamp(float(number), tz=UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _dated(test: Callable[[datetime, datetime], bool]) -> Compare:
    def compare(value: str, wanted: str) -> bool:
        a, b = parse_date(value), parse_date(wanted)
        return a is not None and b is not None and test(a, b)
    return compare


def _ip(value: str, wanted: str) -> bool:
    try:
        return ipaddress.ip_address(value.strip()) in ipaddress.ip_network(
            wanted.strip(), strict=False)
    except ValueError:
        return False


def _arn_like(value: str, wanted: str) -> bool:
    """ARNs compare part by part (six colon-separated parts), each with wildcards."""
    have, want = value.split(":", 5), wanted.split(":", 5)
    if len(have) != 6 or len(want) != 6:
        return False
    return all(like(w, h) for w, h in zip(want, have, strict=True))


def _bool(value: str, wanted: str) -> bool:
    return str(value).lower() == str(wanted).lower() and str(value).lower() in ("true", "false")


_BASE: dict[str, tuple[Compare, bool]] = {
    # operator: (positive comparison, negated)
    "StringEquals": (lambda v, w: v == w, False),
    "StringNotEquals": (lambda v, w: v == w, True),
    "StringEqualsIgnoreCase": (lambda v, w: v.lower() == w.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda v, w: v.lower() == w.lower(), True),
    "StringLike": (lambda v, w: like(w, v), False),
    "StringNotLike": (lambda v, w: like(w, v), True),
    "NumericEquals": (_numeric(lambda a, b: a == b), False),
    "NumericNotEquals": (_numeric(lambda a, b: a == b), True),
    "NumericLessThan": (_numeric(lambda a, b: a < b), False),
    "NumericLessThanEquals": (_numeric(lambda a, b: a <= b), False),
    "NumericGreaterThan": (_numeric(lambda a, b: a > b), False),
    "NumericGreaterThanEquals": (_numeric(lambda a, b: a >= b), False),
    "DateEquals": (_dated(lambda a, b: a == b), False),
    "DateNotEquals": (_dated(lambda a, b: a == b), True),
    "DateLessThan": (_dated(lambda a, b: a < b), False),
    "DateLessThanEquals": (_dated(lambda a, b: a <= b), False),
    "DateGreaterThan": (_dated(lambda a, b: a > b), False),
    "DateGreaterThanEquals": (_dated(lambda a, b: a >= b), False),
    "Bool": (_bool, False),
    "BinaryEquals": (lambda v, w: v == w, False),
    "IpAddress": (_ip, False),
    "NotIpAddress": (_ip, True),
    "ArnEquals": (_arn_like, False),
    "ArnLike": (_arn_like, False),
    "ArnNotEquals": (_arn_like, True),
    "ArnNotLike": (_arn_like, True),
}


def parse_operator(name: str) -> tuple[str, str, bool] | None:
    """(set qualifier, base operator, IfExists) of an operator name, or None if unknown."""
    qualifier, _, rest = name.partition(":")
    if not rest:
        qualifier, rest = "", name
    if qualifier not in ("", "ForAnyValue", "ForAllValues"):
        return None
    if rest == "Null":
        return ("", "Null", False) if not qualifier else None
    if_exists = rest.endswith("IfExists")
    base = rest[: -len("IfExists")] if if_exists else rest
    return (qualifier, base, if_exists) if base in _BASE else None


def lookup(context: Context, key: str) -> list[str] | None:
    """The context values of a key (keys ignore case), or None when the request lacks it."""
    lowered = key.lower()
    for name, value in context.items():
        if name.lower() == lowered:
            if isinstance(value, bool):
                return [str(value).lower()]
            if isinstance(value, str | int | float):
                return [str(value)]
            return [str(v) for v in value]
    return None


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _condition_holds(operator: str, key: str, wanted: Any, context: Context) -> bool:
    parsed = parse_operator(operator)
    if parsed is None:
        return False
    qualifier, base, if_exists = parsed
    wanted_values = [_text(w) for w in as_list(wanted)]
    values = lookup(context, key)
    if base == "Null":
        absent = values is None or values == []
        return any((w.lower() == "true") == absent for w in wanted_values)
    compare, negated = _BASE[base]

    def matches(value: str) -> bool:
        hit = any(compare(value, w) for w in wanted_values)
        return not hit if negated else hit

    if values is None or values == []:
        if qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        # A key the request lacks matches nothing: true for ...IfExists and for the
        # negated operators, false for the others.
        return if_exists or negated
    if qualifier == "ForAllValues":
        return all(matches(v) for v in values)
    return any(matches(v) for v in values)


def conditions_hold(condition: Mapping[str, Any] | None, context: Context) -> bool:
    """Every operator, and every key under it, must hold (values of a key are ORed)."""
    if not condition:
        return True
    return all(
        _condition_holds(operator, key, wanted, context)
        for operator, block in condition.items()
        for key, wanted in block.items()
    )
