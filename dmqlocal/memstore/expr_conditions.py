"""Condition and filter expressions: compiling their trees into closures (the compiled
condition is cached by its text), and check_condition, which runs one on an item."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from dmqlocal.memstore.expr_parser import Parser
from dmqlocal.memstore.expr_paths import (
    NO_NAMES,
    NO_VALUES,
    Getter,
    check_refs,
    path_getter,
)
from dmqlocal.memstore.expr_syntax import (
    Between,
    Call,
    Compare,
    Cond,
    In,
    Logic,
    Not,
    Operand,
    Path,
    ValueRef,
)
from dmqlocal.memstore.expr_values import (
    ORDERINGS,
    SCALARS,
    AttrValue,
    ExpressionError,
    Item,
    Names,
    Values,
    begins_with,
    contains,
    equal_slow,
    ordered,
    size_of,
    type_of,
)

Test = Callable[[Item, Names, Values], bool]

_NO_ITEM: Item = {}
_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M"})


@dataclass(frozen=True, slots=True)
class ParsedCondition:
    """A compiled condition with the placeholders it uses, in order of appearance."""

    tree: Cond
    test: Test
    refs: tuple[str, ...]


def _value_getter(ref: str) -> Getter:
    """A closure giving a :value placeholder's value."""
    def get(item: Item, names: Names, values: Values) -> AttrValue | None:
        return values[ref]
    return get


def _size_getter(call: Call, label: str) -> Getter:
    """size(operand): a number, or None (every comparison false) when the attribute is
    missing or has no size."""
    arg = call.args[0]
    inner = _compile_operand(arg, label)
    constant = arg.ref if isinstance(arg, ValueRef) else None

    def get(item: Item, names: Names, values: Values) -> AttrValue | None:
        value = inner(item, names, values)
        if value is None:
            return None
        size = size_of(value)
        if size is None:
            if constant is not None:
                raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator "
                                      f"or function; operator or function: size, operand "
                                      f"type: {type_of(value)}")
            return None
        return {"N": str(size)}
    return get


def _compile_operand(node: Operand, label: str) -> Getter:
    """A closure giving a condition operand's value, or None when it is missing."""
    if isinstance(node, Path):
        return path_getter(node)
    if isinstance(node, ValueRef):
        return _value_getter(node.ref)
    assert isinstance(node, Call) and node.name == "size"
    return _size_getter(node, label)


def _constants(*nodes: Operand) -> tuple[str, ...]:
    """The :value placeholders among some operands."""
    return tuple(node.ref for node in nodes if isinstance(node, ValueRef))


def _is_size(node: Operand) -> bool:
    """Whether an operand is a size() call."""
    return isinstance(node, Call) and node.name == "size"


def _check_scalars(refs: tuple[str, ...], values: Values, symbol: str, label: str) -> None:
    """An ordering between a :value that is not N, S or B is an error, not just false."""
    for ref in refs:
        kind = type_of(values[ref])
        if kind not in SCALARS:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: {symbol}, operand type: "
                                  f"{kind}")


def check_bounds(low: AttrValue, high: AttrValue, label: str) -> None:
    """BETWEEN with two :value bounds: same type, and low <= high."""
    low_kind, high_kind = type_of(low), type_of(high)
    quoted = (f"lower bound operand: AttributeValue: {{{low_kind}:{low[low_kind]}}}, upper "
              f"bound operand: AttributeValue: {{{high_kind}:{high[high_kind]}}}")
    if low_kind != high_kind:
        raise ExpressionError(f"Invalid {label}: The BETWEEN operator requires same data "
                              f"type for lower and upper bounds; {quoted}")
    pair = ordered(low, high)
    if pair is not None and pair[0] > pair[1]:
        raise ExpressionError(f"Invalid {label}: The BETWEEN operator requires upper bound "
                              f"to be greater than or equal to lower bound; {quoted}")


def _equals_test(left: Getter, right: Getter) -> Test:
    """`=`: false when either side is missing."""
    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        if a is None:
            return False
        b = right(item, names, values)
        return b is not None and (a == b or equal_slow(a, b))
    return test


def _not_equals_test(left: Getter, right: Getter, sized: tuple[bool, bool]) -> Test:
    """`<>`: a missing attribute is "not equal" to anything, as in DynamoDB (so `a <> :v`
    holds when a is absent, and `a <> b` when both are); a size() that cannot be taken
    makes the comparison false."""
    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        b = right(item, names, values)
        if a is None or b is None:
            return not ((a is None and sized[0]) or (b is None and sized[1]))
        return not (a == b or equal_slow(a, b))
    return test


def _order_test(symbol: str, left: Getter, right: Getter, refs: tuple[str, ...],
                label: str) -> Test:
    """< <= > >=: true only between two present values both N, both S or both B."""
    compare = ORDERINGS[symbol]

    def test(item: Item, names: Names, values: Values) -> bool:
        a = left(item, names, values)
        b = right(item, names, values)
        if a is not None and b is not None:
            pair = ordered(a, b)
            if pair is not None:
                return compare(pair[0], pair[1])
        if refs:
            _check_scalars(refs, values, symbol, label)
        return False
    return test


def _compile_compare(node: Compare, label: str) -> Test:
    """A closure for one comparison."""
    left = _compile_operand(node.left, label)
    right = _compile_operand(node.right, label)
    if node.op == "=":
        return _equals_test(left, right)
    if node.op == "<>":
        return _not_equals_test(left, right, (_is_size(node.left), _is_size(node.right)))
    return _order_test(node.op, left, right, _constants(node.left, node.right), label)


def _compile_between(node: Between, label: str) -> Test:
    """A closure for BETWEEN: low <= subject <= high, all of one type among N, S, B."""
    subject = _compile_operand(node.subject, label)
    low = _compile_operand(node.low, label)
    high = _compile_operand(node.high, label)
    refs = _constants(node.subject, node.low, node.high)
    bounds = (node.low.ref, node.high.ref) if isinstance(node.low, ValueRef) and isinstance(
        node.high, ValueRef) else None

    def test(item: Item, names: Names, values: Values) -> bool:
        x = subject(item, names, values)
        lo = low(item, names, values)
        hi = high(item, names, values)
        if x is not None and lo is not None and hi is not None:
            above = ordered(lo, x)
            below = ordered(x, hi)
            if above is not None and below is not None and (
                    above[0] <= above[1] and below[0] <= below[1]):
                return True
        if refs:
            _check_scalars(refs, values, "BETWEEN", label)
        if bounds is not None:
            check_bounds(values[bounds[0]], values[bounds[1]], label)
        return False
    return test


def _compile_in(node: In, label: str) -> Test:
    """A closure for IN: the subject equals one of the options."""
    subject = _compile_operand(node.subject, label)
    options = tuple(_compile_operand(option, label) for option in node.options)

    def test(item: Item, names: Names, values: Values) -> bool:
        x = subject(item, names, values)
        if x is None:
            return False
        for option in options:
            candidate = option(item, names, values)
            if candidate is not None and (x == candidate or equal_slow(x, candidate)):
                return True
        return False
    return test


def _exists_test(getter: Getter, wanted: bool) -> Test:
    """attribute_exists() (wanted True) or attribute_not_exists() (wanted False)."""
    def test(item: Item, names: Names, values: Values) -> bool:
        return (getter(item, names, values) is not None) is wanted
    return test


def _type_test(getter: Getter, ref: str, label: str) -> Test:
    """attribute_type(path, :type)."""
    def test(item: Item, names: Names, values: Values) -> bool:
        wanted = values[ref]
        kind = wanted.get("S")
        if kind is None:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: attribute_type, operand "
                                  f"type: {type_of(wanted)}")
        if kind not in _TYPES:
            raise ExpressionError(f"Invalid {label}: Invalid attribute type name found; "
                                  f"type: {kind}, valid types: {{B,NULL,SS,BOOL,L,BS,N,NS,S,M}}")
        value = getter(item, names, values)
        return value is not None and kind in value
    return test


def _begins_test(whole: Getter, start: Getter, refs: tuple[str, ...], label: str) -> Test:
    """begins_with(); a :value that is neither S nor B is an error."""
    def test(item: Item, names: Names, values: Values) -> bool:
        value = whole(item, names, values)
        prefix = start(item, names, values)
        if value is not None and prefix is not None and begins_with(value, prefix):
            return True
        for ref in refs:
            kind = type_of(values[ref])
            if kind not in ("S", "B"):
                raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator "
                                      f"or function; operator or function: begins_with, "
                                      f"operand type: {kind}")
        return False
    return test


def _contains_test(whole: Getter, part: Getter) -> Test:
    """contains(); false when either side is missing."""
    def test(item: Item, names: Names, values: Values) -> bool:
        value = whole(item, names, values)
        wanted = part(item, names, values)
        return value is not None and wanted is not None and contains(value, wanted)
    return test


def _compile_call(node: Call, label: str) -> Test:
    """A closure for a true/false function."""
    args = [_compile_operand(arg, label) for arg in node.args]
    if node.name == "attribute_exists":
        return _exists_test(args[0], True)
    if node.name == "attribute_not_exists":
        return _exists_test(args[0], False)
    if node.name == "attribute_type":
        second = node.args[1]
        assert isinstance(second, ValueRef)
        return _type_test(args[0], second.ref, label)
    if node.name == "begins_with":
        return _begins_test(args[0], args[1], _constants(*node.args), label)
    return _contains_test(args[0], args[1])


def _compile_logic(node: Logic, label: str) -> Test:
    """A closure for AND or OR, short-circuiting as Python does."""
    left = _compile_test(node.left, label)
    right = _compile_test(node.right, label)
    if node.op == "AND":
        def both(item: Item, names: Names, values: Values) -> bool:
            return left(item, names, values) and right(item, names, values)
        return both

    def either(item: Item, names: Names, values: Values) -> bool:
        return left(item, names, values) or right(item, names, values)
    return either


def _compile_test(node: Cond, label: str) -> Test:
    """A closure deciding whether a condition holds for an item."""
    if isinstance(node, Logic):
        return _compile_logic(node, label)
    if isinstance(node, Not):
        inner = _compile_test(node.inner, label)

        def negated(item: Item, names: Names, values: Values) -> bool:
            return not inner(item, names, values)
        return negated
    if isinstance(node, Compare):
        return _compile_compare(node, label)
    if isinstance(node, Between):
        return _compile_between(node, label)
    if isinstance(node, In):
        return _compile_in(node, label)
    return _compile_call(node, label)


@functools.lru_cache(maxsize=4096)
def parsed_condition(text: str, label: str) -> ParsedCondition:
    """The compiled condition for an expression text (cached)."""
    parser = Parser(text, label)
    tree = parser.condition()
    parser.expect_end()
    return ParsedCondition(tree, _compile_test(tree, label), parser.refs())


def check_condition(expr: str, item: Item | None, names: Names | None,
                    values: Values | None, *, what: str = "ConditionExpression") -> bool:
    """Whether a ConditionExpression (or, with what="FilterExpression", a filter) holds
    for an item; None or {} means there is no item."""
    parsed = parsed_condition(expr, what)
    names = names or NO_NAMES
    values = values or NO_VALUES
    if parsed.refs:
        check_refs(parsed.refs, names, values, what)
    return parsed.test(item or _NO_ITEM, names, values)
