"""The item calls: GetItem, PutItem, UpdateItem, DeleteItem, BatchGetItem,
BatchWriteItem. Each runs whole under the store's lock, so each is atomic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dmqlocal.memstore import expressions
from dmqlocal.memstore.database import Database
from dmqlocal.memstore.errors import invalid
from dmqlocal.memstore.requests import Answer, Expressions, Request, guarded, returned
from dmqlocal.memstore.tables import Key, Table
from dmqlocal.memstore.values import Item, check_size, clean_item

WRITE_KINDS = {"ConditionExpression": "condition"}
UPDATE_KINDS = {"ConditionExpression": "condition", "UpdateExpression": "update"}
READ_KINDS = {"ProjectionExpression": "projection"}
MAX_BATCH_WRITE = 25
MAX_BATCH_GET = 100


@dataclass
class Change:
    """A write worked out but not yet made: the table, the key, before and after."""

    table: Table
    key: Key
    old: Item | None
    new: Item | None
    updated: frozenset[str] = frozenset()


def plan_put(db: Database, request: Request, exprs: Expressions) -> Change:
    """PutItem's change, once its condition holds."""
    table = db.table(request.get("TableName"))
    item = clean_item(request.get("Item"))
    key = table.key_of(item, whole_item=True)
    table.check_index_keys(item)
    check_size(item)
    old = table.get(key)
    exprs.check(request, old)
    return Change(table, key, old, item)


def plan_delete(db: Database, request: Request, exprs: Expressions) -> Change:
    """DeleteItem's change, once its condition holds."""
    table = db.table(request.get("TableName"))
    key = table.key_of(request.get("Key") or {}, whole_item=False)
    old = table.get(key)
    exprs.check(request, old)
    return Change(table, key, old, None)


def plan_update(db: Database, request: Request, exprs: Expressions) -> Change:
    """UpdateItem's change, once its condition holds: the item made when missing."""
    table = db.table(request.get("TableName"))
    key_item = clean_item(request.get("Key") or {})
    key = table.key_of(key_item, whole_item=False)
    old = table.get(key)
    exprs.check(request, old)
    text = exprs.texts.get("UpdateExpression")
    if text is None:
        return Change(table, key, old, old if old is not None else key_item)
    updated = guarded(lambda: expressions.updated_names(text, exprs.names))
    for name in table.schema.names():
        if name in updated:
            raise invalid(f"One or more parameter values were invalid: Cannot update "
                          f"attribute {name}. This attribute is part of the key")
    base = old if old is not None else key_item
    new = guarded(lambda: expressions.apply_update(text, base, exprs.names, exprs.values))
    table.check_index_keys(new)
    check_size(new)
    return Change(table, key, old, new, updated)


def get_item(db: Database, request: Request) -> Answer:
    """GetItem."""
    table = db.table(request.get("TableName"))
    exprs = Expressions(request, READ_KINDS)
    item = table.get(table.key_of(request.get("Key") or {}, whole_item=False))
    return {} if item is None else {"Item": exprs.project(item)}


def put_item(db: Database, request: Request) -> Answer:
    """PutItem."""
    change = plan_put(db, request, Expressions(request, WRITE_KINDS))
    db.write(change.table, change.key, change.new, change.old)
    return returned(request, change.old, change.new)


def delete_item(db: Database, request: Request) -> Answer:
    """DeleteItem."""
    change = plan_delete(db, request, Expressions(request, WRITE_KINDS))
    db.write(change.table, change.key, None, change.old)
    return returned(request, change.old, None)


def update_item(db: Database, request: Request) -> Answer:
    """UpdateItem."""
    change = plan_update(db, request, Expressions(request, UPDATE_KINDS))
    db.write(change.table, change.key, change.new, change.old)
    return returned(request, change.old, change.new, change.updated)


def _request_items(request: Request) -> dict[str, Any]:
    found = request.get("RequestItems")
    if not isinstance(found, dict) or not found:
        raise invalid("1 validation error detected: Value at 'requestItems' failed to "
                      "satisfy constraint: Member must have length greater than or equal "
                      "to 1")
    return found


def batch_get_item(db: Database, request: Request) -> Answer:
    """BatchGetItem: every key answered (nothing is left unprocessed)."""
    wanted = _request_items(request)
    if sum(len(spec.get("Keys") or []) for spec in wanted.values()) > MAX_BATCH_GET:
        raise invalid("Too many items requested for the BatchGetItem call")
    responses: dict[str, list[Item]] = {}
    for name, spec in wanted.items():
        table = db.table(name)
        exprs = Expressions(spec, READ_KINDS)
        keys = [table.key_of(k, whole_item=False) for k in spec.get("Keys") or []]
        if len(set(keys)) != len(keys):
            raise invalid("Provided list of item keys contains duplicates")
        responses[name] = [exprs.project(item) for key in keys
                           if (item := table.get(key)) is not None]
    return {"Responses": responses, "UnprocessedKeys": {}}


def batch_write_item(db: Database, request: Request) -> Answer:
    """BatchWriteItem: up to 25 puts and deletes, all checked before any is made."""
    wanted = _request_items(request)
    changes: list[Change] = []
    for name, writes in wanted.items():
        for write in writes:
            if "PutRequest" in write:
                put = {"TableName": name, "Item": write["PutRequest"].get("Item")}
                changes.append(plan_put(db, put, Expressions(put, {})))
            elif "DeleteRequest" in write:
                gone = {"TableName": name, "Key": write["DeleteRequest"].get("Key")}
                changes.append(plan_delete(db, gone, Expressions(gone, {})))
            else:
                raise invalid("A BatchWriteItem request must hold a PutRequest or a "
                              "DeleteRequest")
    if len(changes) > MAX_BATCH_WRITE:
        raise invalid("1 validation error detected: Value at 'requestItems' failed to "
                      "satisfy constraint: Map value must satisfy constraint: [Member must "
                      "have length less than or equal to 25, Member must have length "
                      "greater than or equal to 1]")
    keys = [(c.table.name, c.key) for c in changes]
    if len(set(keys)) != len(keys):
        raise invalid("Provided list of item keys contains duplicates")
    for change in changes:
        db.write(change.table, change.key, change.new, change.table.get(change.key))
    return {"UnprocessedItems": {}}


CALLS = {"GetItem": get_item, "PutItem": put_item, "DeleteItem": delete_item,
         "UpdateItem": update_item, "BatchGetItem": batch_get_item,
         "BatchWriteItem": batch_write_item}
