"""The placeholders an expression uses, so that ExpressionAttributeNames and
ExpressionAttributeValues entries no expression of a request uses can be refused."""

from __future__ import annotations

from dmqlocal.memstore.expr_conditions import parsed_condition
from dmqlocal.memstore.expr_projection import parsed_projection
from dmqlocal.memstore.expr_updates import parsed_update

_LABELS = {"condition": "ConditionExpression", "filter": "FilterExpression",
           "key": "KeyConditionExpression"}


def references(expr: str, kind: str) -> tuple[frozenset[str], frozenset[str]]:
    """The "#name" and ":value" placeholders an expression uses. kind is "condition",
    "filter", "update", "projection" or "key"; the expression must parse."""
    if kind == "update":
        refs = parsed_update(expr).refs
    elif kind == "projection":
        refs = parsed_projection(expr).refs
    elif kind in _LABELS:
        refs = parsed_condition(expr, _LABELS[kind]).refs
    else:
        raise ValueError(f"unknown expression kind: {kind}")
    return (frozenset(r for r in refs if r[0] == "#"),
            frozenset(r for r in refs if r[0] == ":"))
