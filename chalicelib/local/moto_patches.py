"""Fixes to in-process moto that make it fit to hold a queue for a long-running server.

Each patch keeps moto's behaviour as DynamoDB documents it and changes only how
moto does the work:

- `serialise_requests`: one moto request at a time. moto evaluates a condition and
  then writes, without a lock; DynamoDB applies conditions atomically.
- `untrack_dynamodb_models`: moto remembers every model object it ever created (for
  its reset API, which DMQ does not use), so every item, item copy and stream record
  would stay in memory for the life of the process.
- `cheap_transaction_backups`: before a TransactWriteItems, moto deep-copies each
  table it touches, every item and stream record included, in case it must roll back.
  That made a delete batch cost time and memory in proportion to the whole table.
  The backup here copies the table's item index and only the items the transaction
  names; a rollback also drops the stream records the cancelled writes produced.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import threading
from collections import defaultdict
from typing import Any

_LOCK = threading.RLock()
_APPLIED: set[str] = set()
# The keys a running TransactWriteItems names, per table: what its backup must copy.
_TOUCHED: contextvars.ContextVar[dict[str, list[dict[str, Any]]] | None] = (
    contextvars.ContextVar("dmq_touched_keys", default=None)
)


def apply_all() -> None:
    """Apply every patch once per process."""
    for patch in (serialise_requests, untrack_dynamodb_models, cheap_transaction_backups):
        if patch.__name__ not in _APPLIED:
            patch()
            _APPLIED.add(patch.__name__)


def serialise_requests() -> None:
    """Run one moto request at a time, so conditional writes are atomic."""
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.process_request

    @functools.wraps(original)
    def locked(self: Any, request: Any) -> Any:
        with _LOCK:
            return original(self, request)

    BotocoreStubber.process_request = locked  # type: ignore[method-assign]


def untrack_dynamodb_models() -> None:
    """Stop moto from keeping a reference to every DynamoDB model object it creates."""
    from moto.core.common_models import BaseModel

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        instance: Any = object.__new__(cls)
        if not cls.__module__.startswith("moto.dynamodb"):
            cls.instances_tracked.append(instance)  # type: ignore[attr-defined]
        return instance

    BaseModel.__new__ = new  # type: ignore[method-assign]


def cheap_transaction_backups() -> None:
    """Back up only what a transaction can change, and roll back its stream records."""
    from moto.dynamodb import models as dynamodb_models

    backend = dynamodb_models.DynamoDBBackend
    original = backend.transact_write_items

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        touched: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in transact_items:
            for op in entry.values():
                if isinstance(op, dict) and op.get("TableName"):
                    touched[op["TableName"]].append(op.get("Key") or op.get("Item") or {})
        shards = {name: table.stream_shard for name, table in self.tables.items()
                  if table.stream_shard is not None}
        lengths = {name: len(shard.items) for name, shard in shards.items()}
        token = _TOUCHED.set(dict(touched))
        try:
            original(self, transact_items)
        except Exception:
            for name, shard in shards.items():
                del shard.items[lengths[name]:]
                if name in self.tables:
                    shard.table = self.tables[name]
            raise
        finally:
            _TOUCHED.reset(token)

    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    setattr(dynamodb_models, "copy", _BackupCopy(dynamodb_models.Table))  # noqa: B010


class _BackupCopy:
    """Stands in for the `copy` module inside moto's DynamoDB backend."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        touched = _TOUCHED.get()
        if touched is None or not isinstance(value, self._table_type):
            return copy.deepcopy(value, memo)
        table: Any = value
        return _table_backup(table, touched.get(table.name, []))

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _table_backup(table: Any, keys: list[dict[str, Any]]) -> Any:
    """A copy of `table` that shares its unchanged items and copies the named ones.

    A transaction replaces items it puts and removes items it deletes (the copy's own
    index keeps the old ones), but updates items in place: those are copied.
    """
    from moto.dynamodb.models.dynamo_type import DynamoType

    backup = copy.copy(table)
    if table.range_key_attr is None:
        backup.items = copy.copy(table.items)
    else:
        backup.items = defaultdict(dict, {h: dict(r) for h, r in table.items.items()})
    for key in keys:
        if table.hash_key_attr not in key:
            continue
        hash_value = DynamoType(key[table.hash_key_attr])
        if table.range_key_attr is None:
            if hash_value in table.items:
                backup.items[hash_value] = copy.deepcopy(table.items[hash_value])
            continue
        if table.range_key_attr not in key:
            continue
        range_value = DynamoType(key[table.range_key_attr])
        rows = table.items.get(hash_value, {})
        if range_value in rows:
            backup.items[hash_value][range_value] = copy.deepcopy(rows[range_value])
    return backup
