"""Decoding a JSON 1.0 request body: a JSON object, bounded in depth, its text valid Unicode.

JSON's `\\ud800` escape (and Python's decoding of the bytes ED A0 80) yields a lone
surrogate: a string no UTF-8 encoder, DynamoDB or SQS accepts. Message contents (bodies
and attribute values) are left to the message rules, which answer as SQS does
(`InvalidMessageContents` for a body, `InvalidParameterValue` for an attribute value);
anywhere else it is `InvalidParameterValue`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from chalicelib.service.exceptions import InvalidParameterValueError, SqsError

# SQS's deepest request (a batch entry's message attribute's list value) is 5 deep.
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
# Members whose text is message contents, checked by the message rules.
_BODY_KEYS = frozenset({"MessageBody"})
_ATTRIBUTE_MAPS = frozenset({"MessageAttributes", "MessageSystemAttributes"})

Path = tuple[str, ...]


class SerializationError(SqsError):
    """The body is not a JSON object SQS can read."""

    code = "SerializationException"


def decode_object(body: bytes | None) -> dict[str, Any]:
    """The request's JSON object; SerializationException or InvalidParameterValue if not."""
    try:
        data: Any = json.loads(body or b"{}")
    except RecursionError as exc:
        raise SerializationError(
            f"The request body is nested more than {MAX_DEPTH} levels deep.") from exc
    except ValueError as exc:
        raise SerializationError("The request body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise SerializationError("The request body must be a JSON object.")
    for path, text in _strings(data):
        if _SURROGATE.search(text) and not _is_message_contents(path):
            raise InvalidParameterValueError(
                f"Value for parameter {_name(path)} is invalid. Reason: it holds a lone "
                "surrogate (U+D800 to U+DFFF), which is not a Unicode character."
            )
    return data


def _strings(data: dict[str, Any]) -> Iterator[tuple[Path, str]]:
    """Every key and string value with its path, depth-first without recursion; keys
    come with the path of the map that holds them plus the key itself."""
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            raise SerializationError(
                f"The request body is nested more than {MAX_DEPTH} levels deep.")
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield (*path, key), key
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, "[]"), item) for item in value)


def _is_message_contents(path: Path) -> bool:
    """MessageBody, or a message attribute's StringValue, at the top or in a batch entry."""
    if path[:1] == ("Entries",) and path[1:2] == ("[]",):
        path = path[2:]
    if len(path) == 1:
        return path[0] in _BODY_KEYS
    return len(path) == 3 and path[0] in _ATTRIBUTE_MAPS and path[2] == "StringValue"


def _name(path: Path) -> str:
    """A readable parameter name, its text made printable."""
    name = ".".join(p for p in path if p != "[]") or "(body)"
    return name.encode("utf-8", "backslashreplace").decode("utf-8")
