"""Placeholders and document paths when an expression runs: checking that every
placeholder is defined, resolving #names, reading a path from an item, and refusing paths
that overlap or conflict."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dmqlocal.memstore.expr_syntax import Path, Resolved, Step
from dmqlocal.memstore.expr_values import AttrValue, ExpressionError, Item, Names, Values

Getter = Callable[[Item, Names, Values], "AttrValue | None"]

NO_NAMES: Names = {}
NO_VALUES: Values = {}


def check_refs(refs: tuple[str, ...], names: Names, values: Values, label: str) -> None:
    """ExpressionError for the first placeholder with no entry in names or values."""
    for ref in refs:
        if ref[0] == "#":
            if ref not in names:
                raise ExpressionError(f"Invalid {label}: An expression attribute name used "
                                      f"in the document path is not defined; attribute "
                                      f"name: {ref}")
        elif ref not in values:
            raise ExpressionError(f"Invalid {label}: An expression attribute value used in "
                                  f"expression is not defined; attribute value: {ref}")


def resolve(path: Path, names: Names) -> Resolved:
    """The path with each #placeholder replaced by its attribute name."""
    return tuple(names[s] if isinstance(s, str) and s[0] == "#" else s for s in path.steps)


def _descend(value: AttrValue | None, steps: Sequence[Step]) -> AttrValue | None:
    """The value at `steps` inside `value`, or None when anything along them is missing."""
    for step in steps:
        if value is None:
            return None
        if isinstance(step, int):
            elements = value.get("L")
            if elements is None or step >= len(elements):
                return None
            value = elements[step]
        else:
            members = value.get("M")
            if members is None:
                return None
            value = members.get(step)
    return value


def read(item: Item, path: Resolved) -> AttrValue | None:
    """The value at a resolved path in an item, or None."""
    top = item.get(str(path[0]))
    return top if len(path) == 1 else _descend(top, path[1:])


def path_getter(path: Path) -> Getter:
    """A closure reading the path from an item, resolving its placeholders per call."""
    first, rest = str(path.steps[0]), path.steps[1:]  # a path always starts with a name
    if not rest:
        if first[0] == "#":
            def named(item: Item, names: Names, values: Values) -> AttrValue | None:
                return item.get(names[first])
            return named

        def plain(item: Item, names: Names, values: Values) -> AttrValue | None:
            return item.get(first)
        return plain
    if any(isinstance(s, str) and s[0] == "#" for s in path.steps):
        def nested_named(item: Item, names: Names, values: Values) -> AttrValue | None:
            return read(item, resolve(path, names))
        return nested_named

    def nested(item: Item, names: Names, values: Values) -> AttrValue | None:
        return _descend(item.get(first), rest)
    return nested


def _path_text(path: Resolved) -> str:
    """A path as DynamoDB quotes it in messages: [a, b, [1]]."""
    return "[" + ", ".join(f"[{s}]" if isinstance(s, int) else s for s in path) + "]"


def check_paths(paths: Sequence[Resolved], label: str) -> None:
    """ExpressionError when two paths overlap (one is, or lies inside, the other) or
    conflict (one indexes a list where the other names a map key)."""
    for index, one in enumerate(paths):
        for two in paths[index + 1:]:
            for a, b in zip(one, two, strict=False):
                if a != b:
                    if type(a) is not type(b):
                        raise ExpressionError(
                            f"Invalid {label}: Two document paths conflict with each other; "
                            f"must remove or rewrite one of these paths; path one: "
                            f"{_path_text(one)}, path two: {_path_text(two)}")
                    break
            else:
                raise ExpressionError(
                    f"Invalid {label}: Two document paths overlap with each other; must "
                    f"remove or rewrite one of these paths; path one: {_path_text(one)}, "
                    f"path two: {_path_text(two)}")
