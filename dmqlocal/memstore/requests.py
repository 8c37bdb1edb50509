"""What every item call reads from its request: the table, the expression names and
values, the expressions themselves (checked, as DynamoDB checks them, for placeholders
defined but never used), and what ReturnValues asks back."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from dmqlocal.memstore import expressions
from dmqlocal.memstore.errors import condition_failed, invalid
from dmqlocal.memstore.values import AttrValue, Item, clean_value

Request = dict[str, Any]
Answer = dict[str, Any]
T = TypeVar("T")
LEGACY = ("AttributesToGet", "Expected", "AttributeUpdates", "KeyConditions",
          "QueryFilter", "ScanFilter", "ConditionalOperator")


def guarded(call: Callable[[], T]) -> T:
    """Run an expression call; its ExpressionError becomes a ValidationException."""
    try:
        return call()
    except expressions.ExpressionError as exc:
        raise invalid(str(exc)) from None


class Expressions:
    """A request's expressions with their names and values."""

    def __init__(self, request: Request, kinds: dict[str, str]) -> None:
        for legacy in LEGACY:
            if legacy in request:
                raise invalid(f"The in-memory store does not take the legacy parameter "
                              f"{legacy}: use expressions")
        self.names: dict[str, str] | None = request.get("ExpressionAttributeNames")
        raw = request.get("ExpressionAttributeValues")
        self.values: dict[str, AttrValue] | None = (
            None if raw is None else {k: clean_value(v) for k, v in raw.items()})
        self.texts = {field: request[field] for field in kinds if request.get(field)}
        self._check_used(kinds)

    def _check_used(self, kinds: dict[str, str]) -> None:
        names: set[str] = set()
        values: set[str] = set()
        for field, text in self.texts.items():
            try:
                used = expressions.references(text, kinds[field])
            except expressions.ExpressionError as exc:
                raise invalid(str(exc)) from None
            names |= used[0]
            values |= used[1]
        if self.names:
            unused = sorted(set(self.names) - names)
            if unused:
                raise invalid("Value provided in ExpressionAttributeNames unused in "
                              f"expressions: keys: {{{', '.join(unused)}}}")
        if self.values:
            unused = sorted(set(self.values) - values)
            if unused:
                raise invalid("Value provided in ExpressionAttributeValues unused in "
                              f"expressions: keys: {{{', '.join(unused)}}}")
        if self.values is not None and not self.values:
            raise invalid("ExpressionAttributeValues must not be empty")
        if self.names is not None and not self.names:
            raise invalid("ExpressionAttributeNames must not be empty")

    def holds(self, field: str, item: Item | None) -> bool:
        """Whether the condition (or filter) in `field` holds for the item (True when the
        request has none)."""
        text = self.texts.get(field)
        if text is None:
            return True
        return guarded(lambda: expressions.check_condition(text, item, self.names,
                                                           self.values, what=field))

    def check(self, request: Request, item: Item | None) -> None:
        """ConditionalCheckFailedException when the ConditionExpression fails."""
        if not self.holds("ConditionExpression", item):
            wants = request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
            raise condition_failed(item if wants and item is not None else None)

    def project(self, item: Item) -> Item:
        """The item cut to the ProjectionExpression, if any."""
        text = self.texts.get("ProjectionExpression")
        if text is None:
            return item
        return guarded(lambda: expressions.project(text, item, self.names))


def returned(request: Request, old: Item | None, new: Item | None,
             updated: Iterable[str] = ()) -> Answer:
    """The Attributes that ReturnValues asks for."""
    wanted = request.get("ReturnValues") or "NONE"
    if wanted == "NONE":
        return {}
    if wanted == "ALL_OLD":
        found = old
    elif wanted == "ALL_NEW":
        found = new
    elif wanted in ("UPDATED_OLD", "UPDATED_NEW"):
        source = old if wanted == "UPDATED_OLD" else new
        found = {n: source[n] for n in updated if source is not None and n in source}
    else:
        raise invalid(f"1 validation error detected: Value '{wanted}' at 'returnValues' "
                      "failed to satisfy constraint")
    return {"Attributes": found} if found else {}
