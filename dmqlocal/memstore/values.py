"""Attribute values as DynamoDB keeps them: checked, numbers in their canonical text, and
an item's size as DynamoDB counts it (the 400 KB item limit, the 1 MB page)."""

from __future__ import annotations

import re
from typing import Any

from dmqlocal.memstore.errors import invalid
from dmqlocal.memstore.expressions import ExpressionError, normalize_number

AttrValue = dict[str, Any]
Item = dict[str, AttrValue]
MAX_ITEM_BYTES = 400 * 1024
_CANONICAL = re.compile(r"-?(0|[1-9][0-9]{0,37})(\.[0-9]{0,36}[1-9])?")
_SET_NAMES = {"SS": "string", "NS": "number", "BS": "binary"}
_SCALARS = frozenset({"S", "B", "BOOL", "NULL"})


def _number(text: Any) -> str:
    if (isinstance(text, str) and len(text) <= 39 and _CANONICAL.fullmatch(text)
            and text != "-0"):
        return text
    if not isinstance(text, str):
        raise invalid("NUMBER_VALUE cannot be converted to String")
    try:
        return normalize_number(text)
    except ExpressionError as exc:
        raise invalid(str(exc)) from None


def clean_value(value: Any) -> AttrValue:
    """The value as stored (numbers canonical), or ValidationException when it is not an
    attribute value DynamoDB accepts."""
    if not isinstance(value, dict) or len(value) != 1:
        raise invalid("Supplied AttributeValue is empty, must contain exactly one of the "
                      "supported datatypes")
    kind, inner = next(iter(value.items()))
    if kind in _SCALARS:
        if kind == "NULL" and inner is not True:
            raise invalid("One or more parameter values were invalid: Null attribute value "
                          "types must have the value of true")
        return value
    if kind == "N":
        text = _number(inner)
        return value if text is inner else {"N": text}
    if kind == "M":
        return {"M": {str(k): clean_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [clean_value(v) for v in inner]}
    if kind in _SET_NAMES:
        return {kind: _clean_set(kind, inner)}
    raise invalid("Supplied AttributeValue has an unknown data type: " + str(kind))


def _clean_set(kind: str, members: Any) -> list[Any]:
    if not isinstance(members, list) or not members:
        raise invalid(f"One or more parameter values were invalid: An {_SET_NAMES[kind]} set "
                      " may not be empty")
    found = [_number(m) for m in members] if kind == "NS" else list(members)
    if len(set(found)) != len(found):
        raise invalid(f"Input collection {members} contains duplicates.")
    return found


def clean_item(item: Any) -> Item:
    """Every attribute of an item checked (see `clean_value`)."""
    if not isinstance(item, dict):
        raise invalid("Item must be a map of attribute values")
    return {name: clean_value(value) for name, value in item.items()}


def value_size(value: AttrValue) -> int:
    """A value's size in bytes as DynamoDB counts it (close enough for the limits)."""
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(inner.encode("utf-8")) if not inner.isascii() else len(inner)
    if kind == "N":
        return (len(inner) + 1) // 2 + 1
    if kind == "B":
        return len(inner) * 3 // 4
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in inner)
    if kind == "NS":
        return sum((len(n) + 1) // 2 + 1 for n in inner)
    if kind == "BS":
        return sum(len(b) * 3 // 4 for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    return 3 + sum(1 + len(k) + value_size(v) for k, v in inner.items())


def item_size(item: Item) -> int:
    """An item's size: its names and values."""
    return sum(len(name) + value_size(value) for name, value in item.items())


def check_size(item: Item) -> int:
    """The item's size, or ValidationException above DynamoDB's 400 KB."""
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise invalid("Item size has exceeded the maximum allowed size")
    return size
