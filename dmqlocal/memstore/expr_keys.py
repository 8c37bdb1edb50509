"""Key condition expressions: a Query's equality on the hash key and its optional range
key condition, and whether a range key value satisfies it."""

from __future__ import annotations

from dataclasses import dataclass

from dmqlocal.memstore.expr_conditions import check_bounds, parsed_condition
from dmqlocal.memstore.expr_paths import NO_NAMES, NO_VALUES, check_refs, resolve
from dmqlocal.memstore.expr_syntax import (
    Arith,
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
    Names,
    Values,
    begins_with,
    equal,
    ordered,
    type_of,
)

_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class KeyCondition:
    """A Query's key condition: the hash key's value and an optional range condition."""

    hash_value: AttrValue
    range_op: str | None  # None, "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
    range_values: tuple[AttrValue, ...]  # 0, 1 or 2 values


def _key_terms(node: Cond, out: list[Cond]) -> None:
    """The conditions joined by AND; anything a key condition cannot hold is refused."""
    if isinstance(node, Logic):
        if node.op == "OR":
            raise ExpressionError("Invalid operator used in KeyConditionExpression: OR")
        _key_terms(node.left, out)
        _key_terms(node.right, out)
        return
    refused = ("NOT" if isinstance(node, Not) else "IN" if isinstance(node, In)
               else "<>" if isinstance(node, Compare) and node.op == "<>"
               else node.name if isinstance(node, Call) and node.name != "begins_with"
               else None)
    if refused is not None:
        raise ExpressionError(f"Invalid operator used in KeyConditionExpression: {refused}")
    out.append(node)


def _key_name(operand: Operand, names: Names) -> str:
    """The key attribute a term is about."""
    if isinstance(operand, Call | Arith):
        raise ExpressionError("KeyConditionExpressions cannot contain nested operations")
    if isinstance(operand, ValueRef):
        raise ExpressionError("Invalid condition in KeyConditionExpression: No key attribute "
                              "specified")
    if len(operand.steps) > 1:
        raise ExpressionError("KeyConditionExpressions cannot have conditions on nested "
                              "attributes")
    return str(resolve(operand, names)[0])


def _key_value(operand: Operand, values: Values) -> AttrValue:
    """A value a term compares its key with."""
    if isinstance(operand, Call | Arith):
        raise ExpressionError("KeyConditionExpressions cannot contain nested operations")
    if isinstance(operand, Path):
        raise ExpressionError("Invalid condition in KeyConditionExpression: Multiple "
                              "attribute names used in one condition")
    return values[operand.ref]


def _key_term(node: Cond, names: Names,
              values: Values) -> tuple[str, str, tuple[AttrValue, ...]]:
    """(key attribute, operator, values) for one term of a key condition."""
    if isinstance(node, Compare):
        left, right, op = node.left, node.right, node.op
        if isinstance(right, Path) and not isinstance(left, Path):
            left, right, op = right, left, _FLIPPED[op]
        return _key_name(left, names), op, (_key_value(right, values),)
    if isinstance(node, Between):
        if not isinstance(node.subject, Path):
            raise ExpressionError("Invalid condition in KeyConditionExpression: BETWEEN "
                                  "operator must have the key attribute as its first operand")
        return (_key_name(node.subject, names), "BETWEEN",
                (_key_value(node.low, values), _key_value(node.high, values)))
    assert isinstance(node, Call)
    if not isinstance(node.args[0], Path):
        raise ExpressionError("Invalid condition in KeyConditionExpression: begins_with "
                              "operator must have the key attribute as its first operand")
    return _key_name(node.args[0], names), "begins_with", (_key_value(node.args[1], values),)


def _check_range(op: str, operands: tuple[AttrValue, ...]) -> None:
    """The range key's values must suit the operator."""
    label = "KeyConditionExpression"
    allowed = ("S", "B") if op == "begins_with" else SCALARS
    for operand in operands:
        kind = type_of(operand)
        if kind not in allowed:
            raise ExpressionError(f"Invalid {label}: Incorrect operand type for operator or "
                                  f"function; operator or function: {op}, operand type: "
                                  f"{kind}")
    if op == "BETWEEN":
        check_bounds(operands[0], operands[1], label)


def key_condition(expr: str, names: Names | None, values: Values | None, hash_key: str,
                  range_key: str | None) -> KeyCondition:
    """A KeyConditionExpression: an equality on the hash key, optionally AND one
    condition on the range key (either order, parentheses allowed)."""
    label = "KeyConditionExpression"
    parsed = parsed_condition(expr, label)
    names = names or NO_NAMES
    values = values or NO_VALUES
    check_refs(parsed.refs, names, values, label)
    terms: list[Cond] = []
    _key_terms(parsed.tree, terms)
    found: dict[str, tuple[str, tuple[AttrValue, ...]]] = {}
    for term in terms:
        name, op, operands = _key_term(term, names, values)
        if name in found:
            raise ExpressionError("KeyConditionExpressions must only contain one condition "
                                  "per key")
        found[name] = (op, operands)
    hashed = found.pop(hash_key, None)
    if hashed is None:
        raise ExpressionError(f"Query condition missed key schema element: {hash_key}")
    if hashed[0] != "=":
        raise ExpressionError("Query key condition not supported")
    ranged = found.pop(range_key, None) if range_key is not None else None
    if found:
        if range_key is not None and ranged is None:
            raise ExpressionError(f"Query condition missed key schema element: {range_key}")
        raise ExpressionError("Query key condition not supported")
    if ranged is None:
        return KeyCondition(hashed[1][0], None, ())
    _check_range(*ranged)
    return KeyCondition(hashed[1][0], ranged[0], ranged[1])


def range_matches(cond: KeyCondition, value: AttrValue) -> bool:
    """Whether a range key value satisfies the key condition's range part."""
    op = cond.range_op
    if op is None:
        return True
    first = cond.range_values[0]
    if op == "=":
        return equal(value, first)
    if op == "begins_with":
        return begins_with(value, first)
    pair = ordered(value, first)
    if pair is None:
        return False
    if op == "BETWEEN":
        upper = ordered(value, cond.range_values[1])
        return upper is not None and pair[1] <= pair[0] and upper[0] <= upper[1]
    return ORDERINGS[op](pair[0], pair[1])
