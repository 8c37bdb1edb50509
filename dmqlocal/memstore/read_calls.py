"""Query and Scan: a Query walks one partition (or one index partition) between the
bounds its key condition sets, so its cost follows the items it reads, never the
partition's size; pages stop at Limit items read or at 1 MB."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

from dmqlocal.memstore import expressions
from dmqlocal.memstore.database import Database
from dmqlocal.memstore.errors import invalid
from dmqlocal.memstore.requests import Answer, Expressions, Request, guarded
from dmqlocal.memstore.tables import Index, Key, Table
from dmqlocal.memstore.values import Item, item_size

PAGE_BYTES = 1024 * 1024
QUERY_KINDS = {"KeyConditionExpression": "key", "FilterExpression": "filter",
               "ProjectionExpression": "projection"}
SCAN_KINDS = {"FilterExpression": "filter", "ProjectionExpression": "projection"}


class _Top:
    """Sorts after every key value: closes a range over index entries."""

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return other is self

    def __gt__(self, other: object) -> bool:
        return other is not self

    def __ge__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0


TOP = _Top()


def _index(table: Table, request: Request) -> Index | None:
    name = request.get("IndexName")
    if name is None:
        return None
    index = table.indexes.get(name)
    if index is None:
        raise invalid(f"The table does not have the specified index: {name}")
    if request.get("ConsistentRead") and not index.local:
        raise invalid("Consistent reads are not supported on global secondary indexes")
    return index


def _bounds(cond: expressions.KeyCondition) -> tuple[Any, Any, bool, bool]:
    """(low, high, low inclusive, high inclusive) over range sort values; None is open."""
    values: list[Any] = [expressions.sort_value(v) for v in cond.range_values]
    op = cond.range_op
    if op is None:
        return None, None, True, True
    if op == "=":
        return values[0], values[0], True, True
    if op in ("<", "<="):
        return None, values[0], True, op == "<="
    if op in (">", ">="):
        return values[0], None, op == ">=", True
    if op == "BETWEEN":
        if values[0] > values[1]:
            raise invalid("Invalid KeyConditionExpression: The BETWEEN operator requires "
                          "upper bound to be greater than or equal to lower bound")
        return values[0], values[1], True, True
    return values[0], None, True, True  # begins_with: from the prefix, stop at the first miss


def _entry_bound(value: Any, inclusive: bool, low: bool) -> Any:
    """A bound over index entries (range value, table hash, table range)."""
    if value is None:
        return None
    return (value,) if inclusive == low else (value, TOP)


def _walk(table: Table, index: Index | None, hash_value: Any,
          bounds: tuple[Any, Any, bool, bool], forward: bool,
          start: Key | tuple[Any, ...] | None) -> Iterator[Item]:
    """The items of one partition within the bounds, in order, after `start`."""
    if index is None:
        return _walk_table(table, hash_value, bounds, forward, start)
    return _walk_index(table, index, hash_value, bounds, forward, start)


def _walk_table(table: Table, hash_value: Any, bounds: tuple[Any, Any, bool, bool],
                forward: bool, start: Key | tuple[Any, ...] | None) -> Iterator[Item]:
    partition = table.partitions.get(hash_value)
    if partition is None:
        return
    low, high, low_in, high_in = bounds
    if start is not None:
        after = start[1]
        if forward and (low is None or after >= low):
            low, low_in = after, False
        elif not forward and (high is None or after <= high):
            high, high_in = after, False
    for range_value in partition.irange(low, high, (low_in, high_in), reverse=not forward):
        yield partition[range_value]


def _walk_index(table: Table, index: Index, hash_value: Any,
                bounds: tuple[Any, Any, bool, bool], forward: bool,
                start: Key | tuple[Any, ...] | None) -> Iterator[Item]:
    entries = index.entries.get(hash_value)
    if entries is None:
        return
    low, high, low_in, high_in = bounds
    lo, hi = _entry_bound(low, low_in, True), _entry_bound(high, high_in, False)
    # Those bounds are never an entry, so only a start (an entry) needs excluding.
    lo_in = hi_in = True
    if start is not None:
        if forward and (lo is None or start >= lo):
            lo, lo_in = start, False
        elif not forward and (hi is None or start <= hi):
            hi, hi_in = start, False
    for entry in entries.irange(lo, hi, (lo_in, hi_in), reverse=not forward):
        item = table.get((entry[1], entry[2]))
        if item is not None:
            yield item


def _esk_position(table: Table, index: Index | None, esk: Item) -> Any:
    key = table.key_of({n: esk[n] for n in table.schema.names() if n in esk},
                       whole_item=False)
    if index is None:
        return key
    where = index.position(esk, key)
    if where is None:
        raise invalid("The provided starting key is invalid")
    return where[1]


def _last_key(table: Table, index: Index | None, item: Item) -> Item:
    names = set(table.schema.names())
    if index is not None:
        names |= set(index.schema.names())
    return {n: item[n] for n in names if n in item}


def _page(request: Request, table: Table, index: Index | None, walk: Iterator[Item],
          exprs: Expressions) -> Answer:
    """Read items from `walk` into one page: Limit, 1 MB, filter, projection, Select."""
    limit = request.get("Limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise invalid("1 validation error detected: Value at 'limit' failed to satisfy "
                      "constraint: Member must have value greater than or equal to 1")
    counting = request.get("Select") == "COUNT"
    found: list[Item] = []
    scanned = size = 0
    last: Item | None = None
    stopped = False
    for item in walk:
        if (limit is not None and scanned >= limit) or size > PAGE_BYTES:
            stopped = True
            break
        scanned += 1
        shown = index.projected(item, table.schema) if index is not None else item
        size += item_size(shown)
        last = item
        if exprs.holds("FilterExpression", shown):
            found.append(shown)
    answer: Answer = {"Count": len(found), "ScannedCount": scanned}
    if not counting:
        answer["Items"] = [exprs.project(i) for i in found]
    if stopped or (limit is not None and scanned >= limit and last is not None):
        assert last is not None
        answer["LastEvaluatedKey"] = _last_key(table, index, last)
    return answer


def query(db: Database, request: Request) -> Answer:
    """Query."""
    table = db.table(request.get("TableName"))
    index = _index(table, request)
    exprs = Expressions(request, QUERY_KINDS)
    text = exprs.texts.get("KeyConditionExpression")
    if text is None:
        raise invalid("Either the KeyConditions or KeyConditionExpression parameter must be "
                      "specified in the request.")
    schema = index.schema if index is not None else table.schema
    cond = guarded(lambda: expressions.key_condition(text, exprs.names, exprs.values,
                                                     schema.hash_name, schema.range_name))
    if schema.hash_type not in cond.hash_value or (
            cond.range_values and any(schema.range_type not in v for v in cond.range_values)):
        raise invalid("One or more parameter values were invalid: Condition parameter type "
                      "does not match schema type")
    forward = request.get("ScanIndexForward", True) is not False
    esk = request.get("ExclusiveStartKey")
    start = None if esk is None else _esk_position(table, index, esk)
    walk = _walk(table, index, expressions.sort_value(cond.hash_value), _bounds(cond),
                 forward, start)
    if cond.range_op == "begins_with":
        walk = _prefixed(walk, cond, schema.range_name or "")
    return _page(request, table, index, walk, exprs)


def _prefixed(walk: Iterator[Item], cond: expressions.KeyCondition,
              name: str) -> Iterator[Item]:
    """Items while their range key begins with the prefix (they sort together)."""
    for item in walk:
        if not expressions.range_matches(cond, item[name]):
            return
        yield item


def _segment(hash_value: Any, total: int) -> int:
    return zlib.crc32(repr(hash_value).encode()) % total


def scan(db: Database, request: Request) -> Answer:
    """Scan: partitions in a stable order, split into segments by partition."""
    table = db.table(request.get("TableName"))
    index = _index(table, request)
    exprs = Expressions(request, SCAN_KINDS)
    total = request.get("TotalSegments")
    segment = request.get("Segment")
    if total is not None or segment is not None:
        if not isinstance(total, int) or not isinstance(segment, int):
            raise invalid("The Segment parameter is required but was not present in the "
                          "request when parameter TotalSegments is present")
        if not 0 <= segment < total <= 1_000_000:
            raise invalid(f"The Segment parameter is zero-based and must be less than "
                          f"parameter TotalSegments: Segment: {segment} is not less than "
                          f"TotalSegments: {total}")
    esk = request.get("ExclusiveStartKey")
    start = None if esk is None else _esk_position(table, index, esk)
    return _page(request, table, index, _scan_walk(table, index, total, segment, start, esk),
                 exprs)


def _scan_walk(table: Table, index: Index | None, total: int | None, segment: int | None,
               start: Any, esk: Item | None) -> Iterator[Item]:
    source = table.partitions if index is None else index.entries
    hashes = sorted(h for h in source
                    if total is None or _segment(h, total) == segment)
    start_hash = None
    if esk is not None:
        start_hash = start[0] if index is None else _index_hash(index, esk)
    for hash_value in hashes:
        if start_hash is not None and hash_value < start_hash:
            continue
        first = start if start_hash is not None and hash_value == start_hash else None
        yield from _walk(table, index, hash_value, (None, None, True, True), True, first)


def _index_hash(index: Index, esk: Item) -> Any:
    return expressions.sort_value(esk[index.schema.hash_name])


CALLS = {"Query": query, "Scan": scan}
