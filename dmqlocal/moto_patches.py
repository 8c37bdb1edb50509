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
- `partition_index_queries`: moto answers a Query on a local secondary index by
  sorting every item of the table, then walking them in index order. The query now
  reads only the partition it names and, when it has a Limit, hands moto just the
  first Limit + 1 index entries past the start key (found in one pass), so moto's own
  code still decides the page, the projection and LastEvaluatedKey.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import heapq
import inspect
import threading
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from dmqlocal import moto_index
from dmqlocal.moto_index import sort_key

_LOCK = threading.RLock()
_APPLIED: set[str] = set()
# The keys a running TransactWriteItems names, per table: what its backup must copy.
_TOUCHED: contextvars.ContextVar[dict[str, list[dict[str, Any]]] | None] = (
    contextvars.ContextVar("dmq_touched_keys", default=None)
)
# The items a running index Query may consider, for the one table it reads.
_QUERY_ITEMS: contextvars.ContextVar[tuple[int, list[Any]] | None] = (
    contextvars.ContextVar("dmq_query_items", default=None)
)


def apply_all() -> None:
    """Apply every patch once per process."""
    patches = (serialise_requests, untrack_dynamodb_models, cheap_transaction_backups,
               partition_index_queries)
    for patch in patches:
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
    moto_index.forget(backup)
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


def partition_index_queries() -> None:
    """Answer local-index queries from the named partition, reading what the page needs."""
    from moto.dynamodb.models.table import Table

    original_query = Table.query
    original_all_items = Table.all_items
    signature = inspect.signature(original_query)

    @functools.wraps(original_query)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        items = _local_index_items(self, bound.arguments)
        token = _QUERY_ITEMS.set(None if items is None else (id(self), items))
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _QUERY_ITEMS.reset(token)

    @functools.wraps(original_all_items)
    def all_items(self: Any) -> Any:
        restricted = _QUERY_ITEMS.get()
        if restricted is not None and restricted[0] == id(self):
            return list(restricted[1])
        return original_all_items(self)

    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    _keep_partition_indexes()


def _keep_partition_indexes() -> None:
    """Place every item moto writes in the sorted partition views of its table."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    original_put = Table.put_item
    original_update = DynamoDBBackend.update_item

    @functools.wraps(original_put)
    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, *args, **kwargs)
        moto_index.item_written(self, item)
        return item

    @functools.wraps(original_update)
    def update_item(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        item = original_update(self, table_name, *args, **kwargs)
        table = self.get_table(table_name)
        if item is not None and table.range_key_attr:  # only range tables have an LSI
            moto_index.item_written(table, table.items.get(item.hash_key, {}).get(item.range_key))
        return item

    Table.put_item = put_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


def _local_index_items(table: Any, args: dict[str, Any]) -> list[Any] | None:
    """What a query of a local secondary index needs to see; None: let moto read it all."""
    index_name, hash_key = args.get("index_name"), args.get("hash_key")
    local = {index.name: index for index in (table.indexes or [])}
    if not index_name or index_name not in local or hash_key is None or not table.range_key_attr:
        return None
    ranges = [k["AttributeName"] for k in local[index_name].schema if k["KeyType"] == "RANGE"]
    above = _lower_bound_items(table, index_name, ranges, hash_key, args)
    if above is not None:
        return above
    rows = table.items.get(hash_key)
    items = list(rows.values()) if rows else []
    limit, comparison = args.get("limit"), args.get("range_comparison")
    if (len(ranges) != 1 or not limit or not comparison or args.get("filter_kwargs")
            or args.get("scan_index_forward") is False):
        return items
    numeric = _numeric_test(comparison, args["range_objs"])
    if comparison in ("<", "<=") and numeric is not None:
        view = moto_index.partition_index(table, index_name, ranges[0], hash_key)
        return view.first(int(limit) + 1, _start_key(table, ranges[0], args), numeric)
    return _first_entries(table, items, ranges[0], args, int(limit) + 1)


def _lower_bound_items(
    table: Any, index_name: str, ranges: list[str], hash_key: Any, args: dict[str, Any]
) -> list[Any] | None:
    """A `>` or `>=` numeric key condition, paged or not, read from the sorted view from
    its bound on (the approximate counts read the hidden messages this way)."""
    comparison, values, limit = args.get("range_comparison"), args.get("range_objs"), args.get(
        "limit")
    if (len(ranges) != 1 or comparison not in (">", ">=") or not values
            or values[0].type != "N" or args.get("filter_kwargs")
            or args.get("scan_index_forward") is False):
        return None
    view = moto_index.partition_index(table, index_name, ranges[0], hash_key)
    return view.above(Decimal(values[0].value), comparison == ">=",
                      int(limit) + 1 if limit else None, _start_key(table, ranges[0], args))


def _start_key(table: Any, attr: str, args: dict[str, Any]) -> moto_index.Key | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    start = args.get("exclusive_start_key")
    rank = table.range_key_attr
    if not start or attr not in start or rank not in start:
        return None
    return sort_key(DynamoType(start[attr]), DynamoType(start[rank]))


def _first_entries(
    table: Any, items: list[Any], attr: str, args: dict[str, Any], count: int
) -> list[Any]:
    """The first `count` index entries in (index key, table range key) order that match
    the key condition and come after ExclusiveStartKey: all moto needs for one page."""
    comparison, values = args["range_comparison"], args["range_objs"]
    rank = table.range_key_attr
    after = _start_key(table, attr, args)
    numeric = _numeric_test(comparison, values)
    matching: list[tuple[tuple[Any, Any], int, Any]] = []
    for position, item in enumerate(items):
        value = item.attrs.get(attr)
        if value is None:
            continue
        if numeric is not None and value.type == "N":
            if not numeric(Decimal(value.value)):
                continue
        elif not value.compare(comparison, values):
            continue
        key = sort_key(value, item.attrs[rank])
        if after is None or after < key:
            matching.append((key, position, item))
    return [item for _, _, item in heapq.nsmallest(count, matching)]


def _numeric_test(comparison: str, values: list[Any]) -> Callable[[Decimal], bool] | None:
    """The key condition on a number as a plain comparison (moto's own test is slow)."""
    if not values or any(v.type != "N" for v in values):
        return None
    bounds = [Decimal(v.value) for v in values]
    tests: dict[str, Callable[[Decimal], bool]] = {
        "<": lambda x: x < bounds[0], "<=": lambda x: x <= bounds[0],
        ">": lambda x: x > bounds[0], ">=": lambda x: x >= bounds[0],
        "=": lambda x: x == bounds[0],
        "BETWEEN": lambda x: bounds[0] <= x <= bounds[-1],
    }
    return tests.get(comparison)
