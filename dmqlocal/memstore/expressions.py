"""DynamoDB's expression language over items in DynamoDB JSON, as they travel on the wire.

Condition and filter expressions, update expressions, projection expressions and key
condition expressions. Each expression text is parsed once (the parse is cached by its
text) into a small tree and compiled into closures; the `#name` and `:value` placeholders
are looked up when the closures run, so one parse serves every request that sends the
same text, whatever names and values come with it.

Values are wire values: exactly one of {"S": str}, {"N": "1.5"}, {"B": base64 text},
{"BOOL": bool}, {"NULL": True}, {"SS": [...]}, {"NS": [...]}, {"BS": [...]},
{"L": [value, ...]} or {"M": {name: value}}. Nothing here mutates an item or a value:
an update copies the top-level dict and the containers along each changed path, and
shares everything else.

This module is the public face of the expr_* modules, which hold the pieces:
expr_values (numbers, equality, ordering, sizes), expr_syntax (tokens and tree nodes),
expr_parser (the parser), expr_paths (placeholders and document paths at run time),
expr_conditions (conditions and filters), expr_updates (updates), expr_projection
(projections), expr_keys (key conditions) and expr_references (placeholders used).
"""

from __future__ import annotations

from dmqlocal.memstore.expr_conditions import Test, check_condition
from dmqlocal.memstore.expr_keys import KeyCondition, key_condition, range_matches
from dmqlocal.memstore.expr_paths import Getter
from dmqlocal.memstore.expr_projection import project
from dmqlocal.memstore.expr_references import references
from dmqlocal.memstore.expr_syntax import Resolved, Step
from dmqlocal.memstore.expr_updates import Maker, apply_update, updated_names
from dmqlocal.memstore.expr_values import (
    AttrValue,
    ExpressionError,
    Item,
    Names,
    Values,
    equal,
    normalize_number,
    sort_value,
)

__all__ = [
    "AttrValue",
    "ExpressionError",
    "Getter",
    "Item",
    "KeyCondition",
    "Maker",
    "Names",
    "Resolved",
    "Step",
    "Test",
    "Values",
    "apply_update",
    "check_condition",
    "equal",
    "key_condition",
    "normalize_number",
    "project",
    "range_matches",
    "references",
    "sort_value",
    "updated_names",
]
