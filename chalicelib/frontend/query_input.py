"""Decoding a Query request's form into the parameters the JSON protocol would carry.

A Query request is flat: `Attribute.1.Name=X&Attribute.1.Value=Y`. The input shape of the
action says what each name means, as botocore's Query serialiser writes it: a structure's
member is `<Prefix>.<Name>`; a flattened list is `<Name>.<N>` (the list member's name when
it has one), another list `<Name>.member.<N>`; a flattened map is `<Name>.<N>.<Key>` and
`<Name>.<N>.<Value>` (`.entry.` between them when not flattened). The result is the JSON
protocol's object for the same request, so the same actions serve both.

Scalars arrive as text: integers and booleans become numbers and booleans when they read
as such; other text is handed on unchanged, so the action answers with its own error for
a bad value. Names the shape does not know (Action, Version, signature fields) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from botocore.model import ListShape, MapShape, Shape, StructureShape

_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
Tree = dict[str, Any]  # name -> Tree | str


def form_tree(pairs: Iterable[tuple[str, str]]) -> Tree:
    """The dotted names as a tree; the first value of a repeated name wins, as does the
    first of a name that is both a value and a prefix (`A=1&A.1=2`)."""
    root: Tree = {}
    for key, value in pairs:
        node: Any = root
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(last, value)
    return root


def decode(shape: StructureShape | None, tree: Tree) -> dict[str, Any]:
    """The request's parameters, by the action's input shape."""
    if shape is None:
        return {}
    return _structure(shape, tree)


def _structure(shape: StructureShape, tree: Tree) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        for wire in _names(name, member):
            if wire in tree:
                out[name] = _value(member, tree[wire])
                break
    return out


def _names(name: str, member: Shape) -> list[str]:
    """The names a member can arrive under: its Query name first, then its JSON name."""
    first = member.serialization.get("name", name)
    if isinstance(member, ListShape) and member.serialization.get("flattened"):
        first = member.member.serialization.get("name", first)
    return [first] if first == name else [first, name]


def _value(shape: Shape, node: Any) -> Any:
    if isinstance(node, str):
        return _scalar(shape, node)
    if isinstance(shape, StructureShape):
        return _structure(shape, node)
    if isinstance(shape, ListShape):
        if not shape.serialization.get("flattened"):
            node = node.get(shape.member.serialization.get("name", "member"), {})
        return [_value(shape.member, item) for item in _indexed(node)]
    if isinstance(shape, MapShape):
        return _map(shape, node)
    return None  # a scalar sent as a prefix (`QueueName.1=x`) carries no value


def _map(shape: MapShape, node: Tree) -> dict[str, Any]:
    if not shape.serialization.get("flattened"):
        node = node.get("entry", {}) if isinstance(node.get("entry"), dict) else {}
    key_name = shape.key.serialization.get("name", "key")
    value_name = shape.value.serialization.get("name", "value")
    out: dict[str, Any] = {}
    for entry in _indexed(node):
        if not isinstance(entry, dict) or not isinstance(entry.get(key_name), str):
            continue
        if entry[key_name] not in out and value_name in entry:
            out[entry[key_name]] = _value(shape.value, entry[value_name])
    return out


def _indexed(node: Any) -> list[Any]:
    """The items of `<Name>.1`, `<Name>.2`, ... in index order."""
    if not isinstance(node, dict):
        return []
    indices = sorted(int(k) for k in node if k.isdigit() and len(k) < 10)
    return [node[str(i)] for i in indices if str(i) in node]


def _scalar(shape: Shape, text: str) -> Any:
    if shape.type_name in ("integer", "long") and _INTEGER.fullmatch(text):
        return int(text)
    if shape.type_name == "boolean" and text in ("true", "false"):
        return text == "true"
    return text  # strings, blobs (base64, as in JSON), and mistyped values
