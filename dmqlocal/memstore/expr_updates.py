"""Update expressions: compiling their SET values into closures (the compiled update is
cached by its text), and applying SET, REMOVE, ADD and DELETE to an item. An update copies
the top-level dict and the containers along each changed path, and shares everything
else."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dmqlocal.memstore.expr_parser import Parser
from dmqlocal.memstore.expr_paths import (
    NO_NAMES,
    NO_VALUES,
    Getter,
    check_paths,
    check_refs,
    path_getter,
    read,
    resolve,
)
from dmqlocal.memstore.expr_syntax import Action, Arith, Call, Operand, Path, Resolved, ValueRef
from dmqlocal.memstore.expr_values import (
    SETS,
    AttrValue,
    ExpressionError,
    Item,
    Names,
    Values,
    combine,
    normalize_number,
    set_member,
    set_members,
    type_of,
)

Maker = Callable[[Item, Names, Values], AttrValue]

_SET_WORDS = {"SS": "string", "NS": "number", "BS": "binary"}
_TYPE_WORDS = {"S": "STRING", "N": "NUMBER", "B": "BINARY", "BOOL": "BOOLEAN",
               "NULL": "NULL", "L": "LIST", "M": "MAP", "SS": "STRING_SET",
               "NS": "NUMBER_SET", "BS": "BINARY_SET"}

_MISSING_OPERAND = "The provided expression refers to an attribute that does not exist in the item"
_BAD_OPERAND = "An operand in the update expression has an incorrect data type"
_BAD_PATH = "The document path provided in the update expression is invalid for update"


@dataclass(frozen=True, slots=True)
class ParsedUpdate:
    """A compiled update expression."""

    actions: tuple[Action, ...]
    makers: tuple[Maker | None, ...]
    refs: tuple[str, ...]
    paths: list[Resolved] | None  # the actions' paths, when no #placeholder is in them


def _present(getter: Getter) -> Maker:
    """A path operand in a SET value: it must exist."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        value = getter(item, names, values)
        if value is None:
            raise ExpressionError(_MISSING_OPERAND)
        return value
    return make


def _if_not_exists(getter: Getter, fallback: Maker) -> Maker:
    """if_not_exists(path, operand): the path's value, else the operand's."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        value = getter(item, names, values)
        return fallback(item, names, values) if value is None else value
    return make


def _list_append(first: Maker, second: Maker) -> Maker:
    """list_append(a, b): a new list of a's elements then b's."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        a = first(item, names, values)
        b = second(item, names, values)
        if "L" not in a or "L" not in b:
            raise ExpressionError(_BAD_OPERAND)
        return {"L": [*a["L"], *b["L"]]}
    return make


def _arithmetic(op: str, first: Maker, second: Maker) -> Maker:
    """`a + b` or `a - b`: numbers only, exact, then held to DynamoDB's number limits."""
    def make(item: Item, names: Names, values: Values) -> AttrValue:
        a = first(item, names, values)
        b = second(item, names, values)
        if "N" not in a or "N" not in b:
            raise ExpressionError(_BAD_OPERAND)
        return {"N": combine(op, a["N"], b["N"])}
    return make


def _compile_maker(node: Operand) -> Maker:
    """A closure computing a SET action's value (never missing: that is an error)."""
    if isinstance(node, Path):
        return _present(path_getter(node))
    if isinstance(node, ValueRef):
        ref = node.ref

        def given(item: Item, names: Names, values: Values) -> AttrValue:
            return values[ref]
        return given
    if isinstance(node, Arith):
        return _arithmetic(node.op, _compile_maker(node.left), _compile_maker(node.right))
    assert isinstance(node, Call)
    if node.name == "if_not_exists":
        path = node.args[0]
        assert isinstance(path, Path)
        return _if_not_exists(path_getter(path), _compile_maker(node.args[1]))
    return _list_append(_compile_maker(node.args[0]), _compile_maker(node.args[1]))


@functools.lru_cache(maxsize=4096)
def parsed_update(text: str) -> ParsedUpdate:
    """The compiled update expression for a text (cached)."""
    parser = Parser(text, "UpdateExpression")
    actions = tuple(parser.update())
    parser.expect_end()
    makers = tuple(_compile_maker(a.value) if a.clause == "SET" and a.value is not None
                   else None for a in actions)
    refs = parser.refs()
    paths = None
    if not any(ref[0] == "#" for ref in refs):
        paths = [action.path.steps for action in actions]
        check_paths(paths, "UpdateExpression")
    return ParsedUpdate(actions, makers, refs, paths)


def _written(value: AttrValue, rest: Resolved, new: AttrValue) -> AttrValue:
    """A copy of container `value` with `new` written at `rest` inside it; a list index
    past the end appends."""
    step, deeper = rest[0], rest[1:]
    if isinstance(step, int):
        elements = value.get("L")
        if elements is None:
            raise ExpressionError(_BAD_PATH)
        copied = list(elements)
        if not deeper:
            if step < len(copied):
                copied[step] = new
            else:
                copied.append(new)
        elif step < len(copied):
            copied[step] = _written(copied[step], deeper, new)
        else:
            raise ExpressionError(_BAD_PATH)
        return {"L": copied}
    members = value.get("M")
    if members is None:
        raise ExpressionError(_BAD_PATH)
    changed = dict(members)
    if not deeper:
        changed[step] = new
    elif step in changed:
        changed[step] = _written(changed[step], deeper, new)
    else:
        raise ExpressionError(_BAD_PATH)
    return {"M": changed}


def _write(item: Item, path: Resolved, value: AttrValue) -> None:
    """Write a value at a path of an item we own (its top-level dict is ours)."""
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        item[name] = value
        return
    top = item.get(name)
    if top is None:
        raise ExpressionError(_BAD_PATH)
    item[name] = _written(top, path[1:], value)


def _without(value: AttrValue, rest: Resolved) -> AttrValue | None:
    """A copy of container `value` without what sits at `rest`, or None when nothing is
    there (removing a list element shifts the ones after it)."""
    step, deeper = rest[0], rest[1:]
    if isinstance(step, int):
        elements = value.get("L")
        if elements is None:
            raise ExpressionError(_BAD_PATH)
        if step >= len(elements):
            return None
        if not deeper:
            return {"L": elements[:step] + elements[step + 1:]}
        inner = _without(elements[step], deeper)
        return None if inner is None else {"L": [*elements[:step], inner,
                                                 *elements[step + 1:]]}
    members = value.get("M")
    if members is None:
        raise ExpressionError(_BAD_PATH)
    if step not in members:
        return None
    changed = dict(members)
    if not deeper:
        del changed[step]
        return {"M": changed}
    inner = _without(members[step], deeper)
    if inner is None:
        return None
    changed[step] = inner
    return {"M": changed}


def _remove(item: Item, path: Resolved) -> None:
    """Remove a path from an item we own; a missing path is fine."""
    name = path[0]
    assert isinstance(name, str)
    if len(path) == 1:
        item.pop(name, None)
        return
    top = item.get(name)
    if top is not None:
        changed = _without(top, path[1:])
        if changed is not None:
            item[name] = changed


def _removal_order(path: Resolved) -> tuple[tuple[int, Any], ...]:
    """A sort key that removes later list elements first, so indexes keep their meaning."""
    return tuple((0, -s) if isinstance(s, int) else (1, s) for s in path)


def _check_not_empty(value: AttrValue) -> None:
    """DynamoDB has no empty sets."""
    for kind in SETS:
        if kind in value and not value[kind]:
            raise ExpressionError(f"One or more parameter values were invalid: An "
                                  f"{_SET_WORDS[kind]} set  may not be empty")


def _set_kind(value: AttrValue) -> str | None:
    """"SS", "NS" or "BS" for a set value, else None."""
    for kind in SETS:
        if kind in value:
            return kind
    return None


def _added(current: AttrValue | None, value: AttrValue) -> AttrValue:
    """ADD: a number added (missing counts as 0), or a set joined (missing is empty)."""
    if "N" in value:
        if current is None:
            return {"N": normalize_number(value["N"])}
        if "N" not in current:
            raise ExpressionError(_BAD_OPERAND)
        return {"N": combine("+", current["N"], value["N"])}
    kind = _set_kind(value)
    if kind is None:
        raise ExpressionError(f"Invalid UpdateExpression: Incorrect operand type for operator "
                              f"or function; operator: ADD, operand type: "
                              f"{_TYPE_WORDS.get(type_of(value), '?')}, typeSet: "
                              f"ALLOWED_FOR_ADD_OPERAND")
    _check_not_empty(value)
    if current is None:
        return {kind: list(value[kind])}
    if kind not in current:
        raise ExpressionError(_BAD_OPERAND)
    have = set_members(kind, current[kind])
    joined = list(current[kind])
    for text in value[kind]:
        member = set_member(kind, text)
        if member not in have:
            have.add(member)
            joined.append(text)
    return {kind: joined}


def _deleted(current: AttrValue | None, value: AttrValue) -> AttrValue | None:
    """DELETE: the set without the given members; None when nothing is left (or there
    was nothing)."""
    kind = _set_kind(value)
    if kind is None:
        raise ExpressionError(f"Invalid UpdateExpression: Incorrect operand type for operator "
                              f"or function; operator: DELETE, operand type: "
                              f"{_TYPE_WORDS.get(type_of(value), '?')}, typeSet: "
                              f"ALLOWED_FOR_DELETE_OPERAND")
    _check_not_empty(value)
    if current is None:
        return None
    if kind not in current:
        raise ExpressionError(_BAD_OPERAND)
    gone = set_members(kind, value[kind])
    left = [text for text in current[kind] if set_member(kind, text) not in gone]
    return {kind: left} if left else None


def _prepared(parsed: ParsedUpdate, names: Names | None,
              values: Values | None) -> tuple[Names, Values, list[Resolved]]:
    """Names and values checked against the expression, and every action's path."""
    names = names or NO_NAMES
    values = values or NO_VALUES
    check_refs(parsed.refs, names, values, "UpdateExpression")
    if parsed.paths is not None:
        return names, values, parsed.paths
    paths = [resolve(action.path, names) for action in parsed.actions]
    check_paths(paths, "UpdateExpression")
    return names, values, paths


def apply_update(expr: str, item: Item, names: Names | None,
                 values: Values | None) -> Item:
    """The item after an UpdateExpression, as a new dict (`item` and `values` are never
    mutated; unchanged values are shared). SET values are all computed from the item as
    it was; then SET, ADD and DELETE apply, and REMOVE last (later list elements first)."""
    parsed = parsed_update(expr)
    names, values, paths = _prepared(parsed, names, values)
    new = dict(item)
    removals: list[Resolved] = []
    changes: list[tuple[str, Resolved, AttrValue]] = []
    for action, path, maker in zip(parsed.actions, paths, parsed.makers, strict=True):
        if maker is not None:
            value = maker(item, names, values)
            _check_not_empty(value)
            changes.append(("SET", path, value))
        elif action.clause == "REMOVE":
            removals.append(path)
        else:
            assert isinstance(action.value, ValueRef)
            changes.append((action.clause, path, values[action.value.ref]))
    for clause, path, value in changes:
        _apply_change(new, clause, path, value)
    for path in sorted(removals, key=_removal_order):
        _remove(new, path)
    return new


def _apply_change(new: Item, clause: str, path: Resolved, value: AttrValue) -> None:
    """One SET, ADD or DELETE on the new item."""
    if clause == "SET":
        _write(new, path, value)
    elif clause == "ADD":
        _write(new, path, _added(read(new, path), value))
    else:
        left = _deleted(read(new, path), value)
        if left is not None:
            _write(new, path, left)
        elif read(new, path) is not None:
            _remove(new, path)


def updated_names(expr: str, names: Names | None) -> frozenset[str]:
    """The top-level attribute names an UpdateExpression writes or removes."""
    parsed = parsed_update(expr)
    names = names or NO_NAMES
    check_refs(tuple(r for r in parsed.refs if r[0] == "#"), names, NO_VALUES,
                "UpdateExpression")
    return frozenset(str(resolve(action.path, names)[0]) for action in parsed.actions)
