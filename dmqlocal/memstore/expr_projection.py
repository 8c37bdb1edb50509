"""Projection expressions: the parse (cached by its text), and picking the paths it names
out of an item, keeping their enclosing maps and lists."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from dmqlocal.memstore.expr_parser import Parser
from dmqlocal.memstore.expr_paths import (
    NO_NAMES,
    NO_VALUES,
    check_paths,
    check_refs,
    resolve,
)
from dmqlocal.memstore.expr_syntax import Path, Resolved, Step
from dmqlocal.memstore.expr_values import AttrValue, Item, Names


@dataclass(frozen=True, slots=True)
class ParsedProjection:
    """A parsed projection expression."""

    paths: tuple[Path, ...]
    flat: bool
    refs: tuple[str, ...]


@functools.lru_cache(maxsize=4096)
def parsed_projection(text: str) -> ParsedProjection:
    """The parsed projection expression for a text (cached)."""
    parser = Parser(text, "ProjectionExpression")
    paths = tuple(parser.projection())
    parser.expect_end()
    flat = all(len(path.steps) == 1 for path in paths)
    return ParsedProjection(paths, flat, parser.refs())


_Tree = dict[Step, "_Tree | None"]


def _tree(paths: Iterable[Resolved]) -> _Tree:
    """The paths as a tree of steps; None marks a whole value kept."""
    root: _Tree = {}
    for path in paths:
        node = root
        for step in path[:-1]:
            child = node.setdefault(step, {})
            assert child is not None
            node = child
        node[path[-1]] = None
    return root


def _picked(value: AttrValue, tree: _Tree) -> AttrValue | None:
    """The parts of a container value the tree asks for, or None when none are there.
    List elements keep their order and close up, as DynamoDB returns them."""
    if all(isinstance(step, int) for step in tree):
        elements = value.get("L")
        if elements is None:
            return None
        kept = []
        for index in sorted(tree, key=int):
            if int(index) < len(elements):
                kept_value = _kept(elements[int(index)], tree[index])
                if kept_value is not None:
                    kept.append(kept_value)
        return {"L": kept} if kept else None
    members = value.get("M")
    if members is None:
        return None
    chosen = {}
    for name, sub in tree.items():
        if name in members:
            kept_value = _kept(members[name], sub)
            if kept_value is not None:
                chosen[name] = kept_value
    return {"M": chosen} if chosen else None


def _kept(value: AttrValue, sub: _Tree | None) -> AttrValue | None:
    """What the projection keeps of a value: all of it, or the parts its subtree names."""
    return value if sub is None else _picked(value, sub)


def project(expr: str, item: Item, names: Names | None) -> Item:
    """The item with only the ProjectionExpression's paths; a nested path keeps its
    enclosing maps and lists, holding just what was asked for."""
    parsed = parsed_projection(expr)
    names = names or NO_NAMES
    check_refs(parsed.refs, names, NO_VALUES, "ProjectionExpression")
    paths = [resolve(path, names) for path in parsed.paths]
    check_paths(paths, "ProjectionExpression")
    if parsed.flat:
        return {str(p[0]): item[str(p[0])] for p in paths if p[0] in item}
    result: Item = {}
    for name, sub in _tree(paths).items():
        value = item.get(str(name))
        if value is not None:
            kept = _kept(value, sub)
            if kept is not None:
                result[str(name)] = kept
    return result
