"""TransactWriteItems and TransactGetItems: every condition checked before any write,
all or nothing, a cancellation naming the reason of each item; a ClientRequestToken
makes a repeat within 10 minutes a no-op, as in DynamoDB."""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dmqlocal.memstore.database import Database
from dmqlocal.memstore.errors import StoreError, invalid
from dmqlocal.memstore.item_calls import (
    READ_KINDS,
    UPDATE_KINDS,
    WRITE_KINDS,
    Change,
    plan_delete,
    plan_put,
    plan_update,
)
from dmqlocal.memstore.requests import Answer, Expressions, Request

MAX_ITEMS = 100
TOKEN_LIFE_S = 600.0


def _check_only(db: Database, request: Request, exprs: Expressions) -> Change:
    table = db.table(request.get("TableName"))
    if not request.get("ConditionExpression"):
        raise invalid("The ConditionCheck in a transaction must have a ConditionExpression")
    key = table.key_of(request.get("Key") or {}, whole_item=False)
    old = table.get(key)
    exprs.check(request, old)
    return Change(table, key, old, old)


PLANS: dict[str, tuple[Callable[[Database, Request, Expressions], Change], dict[str, str]]] = {
    "Put": (plan_put, WRITE_KINDS), "Delete": (plan_delete, WRITE_KINDS),
    "Update": (plan_update, UPDATE_KINDS), "ConditionCheck": (_check_only, WRITE_KINDS)}


class Tokens:
    """The ClientRequestTokens of the last 10 minutes, with what each asked."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def repeat(self, token: str | None, items: Any) -> bool:
        """Whether this is a repeat of a transaction already made (IdempotentParameter-
        MismatchException when the token came with other items)."""
        if not token:
            return False
        now = time.monotonic()
        while self._seen and next(iter(self._seen.values()))[1] < now - TOKEN_LIFE_S:
            self._seen.popitem(last=False)
        digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
        seen = self._seen.get(token)
        if seen is None:
            return False
        if seen[0] != digest:
            raise StoreError("IdempotentParameterMismatchException",
                             "Specified idempotency token has been used with different "
                             "request parameters")
        return True

    def remember(self, token: str | None, items: Any) -> None:
        """Keep the token of a transaction made."""
        if token:
            digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
            self._seen[token] = (digest, time.monotonic())


def _items(request: Request) -> list[dict[str, Any]]:
    items = request.get("TransactItems")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_ITEMS:
        raise invalid("1 validation error detected: Value at 'transactItems' failed to "
                      "satisfy constraint: Member must have length less than or equal to "
                      f"{MAX_ITEMS}")
    return items


def _plan(db: Database, entry: dict[str, Any]) -> tuple[Change | None, dict[str, Any]]:
    """One item's change, or None and its cancellation reason."""
    if len(entry) != 1 or next(iter(entry)) not in PLANS:
        raise invalid("TransactItems can only contain one of Check, Put, Update or Delete")
    kind, request = next(iter(entry.items()))
    plan, kinds = PLANS[kind]
    exprs = Expressions(request, kinds)
    try:
        return plan(db, request, exprs), {"Code": "None"}
    except StoreError as exc:
        if exc.code != "ConditionalCheckFailedException":
            raise
        reason = {"Code": "ConditionalCheckFailed", "Message": exc.message}
        if "Item" in exc.extra:
            reason["Item"] = exc.extra["Item"]
        return None, reason


def transact_write_items(db: Database, tokens: Tokens, request: Request) -> Answer:
    """TransactWriteItems."""
    items = _items(request)
    token = request.get("ClientRequestToken")
    if tokens.repeat(token, items):
        return {}
    planned = [_plan(db, entry) for entry in items]
    keys = [(c.table.name, c.key) for c, _ in planned if c is not None]
    if len(set(keys)) != len(keys):
        raise invalid("Transaction request cannot include multiple operations on one item")
    reasons = [reason for _, reason in planned]
    if any(reason["Code"] != "None" for reason in reasons):
        codes = ", ".join(reason["Code"] for reason in reasons)
        raise StoreError("TransactionCanceledException",
                         "Transaction cancelled, please refer cancellation reasons for "
                         f"specific reasons [{codes}]", CancellationReasons=reasons)
    for change, _ in planned:
        assert change is not None
        db.write(change.table, change.key, change.new, change.old)
    tokens.remember(token, items)
    return {}


def transact_get_items(db: Database, request: Request) -> Answer:
    """TransactGetItems."""
    found: list[dict[str, Any]] = []
    for entry in _items(request):
        get = entry.get("Get")
        if not isinstance(get, dict):
            raise invalid("TransactItems of TransactGetItems can only contain Get")
        table = db.table(get.get("TableName"))
        exprs = Expressions(get, READ_KINDS)
        item = table.get(table.key_of(get.get("Key") or {}, whole_item=False))
        found.append({} if item is None else {"Item": exprs.project(item)})
    return {"Responses": found}
