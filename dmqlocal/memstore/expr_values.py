"""Values in DynamoDB JSON as expressions see them: the error every expression raises,
numbers (their canonical text, DynamoDB's limits, exact sums and differences), equality,
ordering, size(), and the string, binary, set and list tests behind begins_with() and
contains().

Values are wire values: exactly one of {"S": str}, {"N": "1.5"}, {"B": base64 text},
{"BOOL": bool}, {"NULL": True}, {"SS": [...]}, {"NS": [...]}, {"BS": [...]},
{"L": [value, ...]} or {"M": {name: value}}. Nothing here mutates a value.
"""

from __future__ import annotations

import base64
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Context, Decimal, InvalidOperation
from typing import Any

AttrValue = dict[str, Any]
Item = dict[str, AttrValue]
Names = Mapping[str, str]
Values = Mapping[str, AttrValue]


class ExpressionError(ValueError):
    """A ValidationException: str(error) is the message DynamoDB would give."""


ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
SCALARS = frozenset({"S", "N", "B"})
SETS = ("SS", "NS", "BS")
_MAX_DIGITS = 38

_NOT_A_NUMBER = "A value provided cannot be converted into a number"
_TOO_PRECISE = "Attempting to store more than 38 significant digits in a Number"
_OVERFLOW = ("Number overflow. Attempting to store a number with magnitude larger than "
             "supported range")
_UNDERFLOW = ("Number underflow. Attempting to store a number with magnitude smaller than "
              "supported range")

# Exact sums and differences of any two DynamoDB numbers (1E-130 to 1E+126, 38 digits)
# fit in 300 digits; the result is then held to 38 significant digits like any number.
_WIDE = Context(prec=300)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def normalize_number(text: str) -> str:
    """DynamoDB's canonical text for a number ("1.50" -> "1.5", "1E+2" -> "100", "-0" ->
    "0"); ExpressionError for text that is not a number, more than 38 significant digits,
    or a magnitude outside 1E-130 to 9.99...E+125."""
    if not isinstance(text, str):
        raise ExpressionError(_NOT_A_NUMBER)
    if text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS and (
            text[0] != "0" or text == "0"):
        return text
    if not _NUMBER.fullmatch(text):
        raise ExpressionError(_NOT_A_NUMBER)
    return _canonical(Decimal(text))


def _canonical(number: Decimal) -> str:
    """The canonical text of a finite number, checked against DynamoDB's limits."""
    if not number.is_finite():
        raise ExpressionError(_NOT_A_NUMBER)
    if not number:
        return "0"
    sign, digits, exponent = number.as_tuple()
    kept = len(digits)
    while digits[kept - 1] == 0:
        kept -= 1
    if kept > _MAX_DIGITS:
        raise ExpressionError(_TOO_PRECISE)
    power = int(exponent) + len(digits) - kept
    magnitude = power + kept - 1
    if magnitude > 125:
        raise ExpressionError(_OVERFLOW)
    if magnitude < -130:
        raise ExpressionError(_UNDERFLOW)
    return format(Decimal((sign, digits[:kept], power)), "f")


def _whole(text: str) -> bool:
    """Whether a number's text is a plain integer (digits with an optional minus)."""
    digits = text[1:] if text[:1] == "-" else text
    return digits.isascii() and digits.isdigit()


def combine(op: str, a: str, b: str) -> str:
    """a + b or a - b for numbers' texts: exact, then held to DynamoDB's limits."""
    if _whole(a) and _whole(b):
        total = str(int(a) + int(b) if op == "+" else int(a) - int(b))
        if len(total) <= _MAX_DIGITS:
            return total
    calculate = _WIDE.add if op == "+" else _WIDE.subtract
    return _canonical(calculate(_num(a), _num(b)))


def _num(text: str) -> Decimal:
    """A number's text as a Decimal."""
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ExpressionError(_NOT_A_NUMBER) from None


def _bytes(text: str) -> bytes:
    """A binary value's base64 text, decoded."""
    return base64.b64decode(text)


def type_of(value: AttrValue) -> str:
    """The type code of a value ("S", "N", ...), or "" when it has none."""
    return next(iter(value), "")


def sort_value(value: AttrValue) -> object:
    """A Python value that orders as DynamoDB orders key values of one type: S by UTF-8
    bytes (Python orders str by code point, which is the same order), N numerically, B
    by the decoded bytes."""
    if "S" in value:
        return value["S"]
    if "N" in value:
        return _num(value["N"])
    if "B" in value:
        return _bytes(value["B"])
    raise ExpressionError(f"A key value must be a string, a number or binary, not "
                          f"{type_of(value) or 'nothing'}")


def equal(a: AttrValue, b: AttrValue) -> bool:
    """DynamoDB equality: numbers numerically ("1.0" equals "1"), sets regardless of
    order, lists and maps deeply; values of different types are never equal."""
    return a == b or equal_slow(a, b)


def equal_slow(a: AttrValue, b: AttrValue) -> bool:
    """Equality for the values that plain dict equality could call different."""
    if len(a) != 1 or len(b) != 1:
        return False
    kind = type_of(a)
    if kind not in b:
        return False
    x, y = a[kind], b[kind]
    if kind == "N":
        return _num(x) == _num(y)
    if kind == "B":
        return _bytes(x) == _bytes(y)
    if kind in SETS:
        return set_members(kind, x) == set_members(kind, y)
    if kind == "L":
        return len(x) == len(y) and all(map(equal, x, y))
    if kind == "M":
        return x.keys() == y.keys() and all(equal(x[k], y[k]) for k in x)
    return False


def set_member(kind: str, text: str) -> object:
    """One set member in a form that compares as DynamoDB compares members."""
    if kind == "NS":
        return _num(text)
    if kind == "BS":
        return _bytes(text)
    return text


def set_members(kind: str, texts: Iterable[str]) -> set[object]:
    """A set's members in a form that compares as DynamoDB compares them."""
    return {set_member(kind, text) for text in texts}


def ordered(a: AttrValue, b: AttrValue) -> tuple[Any, Any] | None:
    """The two values as comparable Python values, or None when they are not both N, both
    S or both B (an ordering between them is then simply false)."""
    if "N" in a:
        return (_num(a["N"]), _num(b["N"])) if "N" in b else None
    if "S" in a:
        return (a["S"], b["S"]) if "S" in b else None
    if "B" in a:
        return (_bytes(a["B"]), _bytes(b["B"])) if "B" in b else None
    return None


def size_of(value: AttrValue) -> int | None:
    """What size() gives for a value: characters of a string, bytes of a binary, members
    of a set, elements of a list or map; None for the types that have no size."""
    kind = type_of(value)
    if kind == "B":
        return len(_bytes(value["B"]))
    if kind in ("S", "SS", "NS", "BS", "L", "M"):
        return len(value[kind])
    return None


def begins_with(value: AttrValue, prefix: AttrValue) -> bool:
    """Whether a string or binary value starts with a prefix of the same type."""
    if "S" in value:
        return "S" in prefix and value["S"].startswith(prefix["S"])
    if "B" in value:
        return "B" in prefix and _bytes(value["B"]).startswith(_bytes(prefix["B"]))
    return False


def contains(value: AttrValue, wanted: AttrValue) -> bool:
    """contains(): a substring of a string or binary, a member of a set, or an element of
    a list equal to the operand."""
    kind = type_of(value)
    if kind == "S":
        return "S" in wanted and wanted["S"] in value["S"]
    if kind == "B":
        return "B" in wanted and _bytes(wanted["B"]) in _bytes(value["B"])
    if kind in SETS:
        member = kind[0]
        return member in wanted and (
            wanted[member] in value[kind]
            or set_member(kind, wanted[member]) in set_members(kind, value[kind]))
    if kind == "L":
        return any(equal(element, wanted) for element in value["L"])
    return False
