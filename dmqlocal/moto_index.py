"""A sorted view of one local-index partition for in-process moto, kept as items change.

moto stores items in a dict per partition and answers an index Query by sorting the
partition. `PartitionIndex` keeps the partition's entries sorted by (index key, table
range key) so that a Query with a Limit reads only the page it returns, as DynamoDB
does. Writes that moto makes through `put_item` and `update_item` add an entry at the
item's new place; entries left behind (the item changed again, or was deleted or
replaced) are found stale when a read meets them, and dropped.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

Key = tuple[Any, Any]
Entry = tuple[Key, int, Any]
_ATTRIBUTE = "_dmq_partition_indexes"
_SEQUENCE = itertools.count()


def sort_key(value: Any, rank: Any) -> Key:
    """An index entry's place as plain values: numbers as Decimals, strings as str."""
    first = Decimal(value.value) if value.type == "N" else (
        value.value if value.type == "S" else value)
    second = rank.value if rank.type == "S" else rank
    return first, second


class PartitionIndex:
    """The entries of one partition of one local index, in index order."""

    def __init__(self, attr: str, rank: str, rows: dict[Any, Any]) -> None:
        self.attr = attr
        self.rank = rank
        self.rows = rows
        self._later: list[Any] = []
        self.entries: list[Entry] = sorted(
            (sort_key(item.attrs[attr], item.attrs[rank]), next(_SEQUENCE), item)
            for item in rows.values() if attr in item.attrs
        )

    def add(self, item: Any) -> None:
        """Place an item that was just written (items without the index key are left out)."""
        if self.attr in item.attrs:
            key = sort_key(item.attrs[self.attr], item.attrs[self.rank])
            bisect.insort(self.entries, (key, next(_SEQUENCE), item))
        if len(self.entries) > 2 * len(self.rows) + 64:
            self.entries = sorted(
                (sort_key(i.attrs[self.attr], i.attrs[self.rank]), next(_SEQUENCE), i)
                for i in self.rows.values() if self.attr in i.attrs
            )

    def first(self, count: int, after: Key | None, within: Callable[[Decimal], bool]) -> list[Any]:
        """Up to `count` items past `after` whose numeric index key passes `within`, which
        must hold for a prefix of the order (an upper bound: `<` or `<=`)."""
        position = 0 if after is None else bisect.bisect_right(
            self.entries, (after, float("inf")))
        return self._collect(position, count, within)

    def above(
        self, bound: Decimal, inclusive: bool, count: int | None, after: Key | None
    ) -> list[Any]:
        """Up to `count` (None: every) items past `after` whose numeric index key is above
        `bound` (or at it, if `inclusive`): a lower bound starts by bisection, so a read
        of the hidden messages never walks the visible ones."""
        cut = bisect.bisect_left if inclusive else bisect.bisect_right
        position = cut(self.entries, bound, key=lambda entry: entry[0][0])
        if after is not None:
            position = max(position, bisect.bisect_right(self.entries, (after, float("inf"))))
        return self._collect(position, len(self.entries) if count is None else count,
                             lambda _: True)

    def _collect(
        self, position: int, count: int, within: Callable[[Decimal], bool]
    ) -> list[Any]:
        found: list[Any] = []
        stale: list[int] = []
        seen: set[int] = set()
        while position < len(self.entries) and len(found) < count:
            key, _, item = self.entries[position]
            if not self._current(key, item) or id(item) in seen:
                stale.append(position)
            elif not isinstance(key[0], Decimal) or not within(key[0]):
                break
            else:
                seen.add(id(item))
                found.append(item)
            position += 1
        self._drop(stale)
        return found

    def _current(self, key: Key, item: Any) -> bool:
        live: Any = self.rows.get(item.range_key)
        if live is None or live is not item or self.attr not in live.attrs:
            return False
        if sort_key(live.attrs[self.attr], live.attrs[self.rank]) == key:
            return True
        self._later.append(live)  # changed without passing through a hooked write
        return False

    def _drop(self, stale: list[int]) -> None:
        for position in reversed(stale):
            del self.entries[position]
        later, self._later = self._later, []
        for item in later:
            if self.rows.get(item.range_key) is item:
                self.add(item)


def indexes_of(table: Any) -> dict[tuple[str, Any], PartitionIndex]:
    """The partition indexes kept for `table` (an attribute of the table object)."""
    found: dict[tuple[str, Any], PartitionIndex] | None = table.__dict__.get(_ATTRIBUTE)
    if found is None:
        found = {}
        table.__dict__[_ATTRIBUTE] = found
    return found


def forget(table: Any) -> None:
    """Drop a table's partition indexes (a copy of the table must build its own)."""
    table.__dict__.pop(_ATTRIBUTE, None)


def partition_index(table: Any, index_name: str, attr: str, hash_key: Any) -> PartitionIndex:
    """The sorted view of one partition of a local index, built on first use."""
    indexes = indexes_of(table)
    rows = table.items.get(hash_key)
    view = indexes.get((index_name, hash_key))
    if view is None or (rows is not None and view.rows is not rows):
        view = PartitionIndex(attr, table.range_key_attr, rows if rows is not None else {})
        indexes[(index_name, hash_key)] = view
    return view


def item_written(table: Any, item: Any) -> None:
    """Place a written item in every partition index of its partition."""
    indexes = table.__dict__.get(_ATTRIBUTE)
    if not indexes or item is None:
        return
    for (_, hash_key), view in indexes.items():
        if hash_key == item.hash_key:
            view.add(item)
