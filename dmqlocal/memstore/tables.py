"""A table held in memory: its partitions (items sorted by their sort key) and the
secondary indexes kept beside them as sorted lists of keys."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedDict, SortedList

from dmqlocal.memstore.errors import invalid
from dmqlocal.memstore.expressions import sort_value
from dmqlocal.memstore.values import AttrValue, Item

NO_RANGE: tuple[()] = ()  # the sort position of an item in a table or index without one
Key = tuple[Any, Any]  # (hash sort value, range sort value or NO_RANGE)


@dataclass
class KeySchema:
    """A table's or an index's key attributes and their types."""

    hash_name: str
    hash_type: str
    range_name: str | None = None
    range_type: str | None = None

    def names(self) -> tuple[str, ...]:
        """The key attribute names."""
        return (self.hash_name,) if self.range_name is None else (self.hash_name,
                                                                   self.range_name)

    def wire(self) -> list[dict[str, str]]:
        """KeySchema as DescribeTable gives it."""
        found = [{"AttributeName": self.hash_name, "KeyType": "HASH"}]
        if self.range_name is not None:
            found.append({"AttributeName": self.range_name, "KeyType": "RANGE"})
        return found


def _typed(value: AttrValue | None, expected: str) -> bool:
    return value is not None and len(value) == 1 and expected in value


@dataclass
class Index:
    """A local or global secondary index: which items it holds and what it projects."""

    name: str
    schema: KeySchema
    projection: dict[str, Any]
    local: bool
    entries: dict[Any, SortedList] = field(default_factory=dict)
    count: int = 0

    def position(self, item: Item, table_key: Key) -> tuple[Any, tuple[Any, ...]] | None:
        """Where the item sits in this index, or None when it lacks the index's keys."""
        hash_value = item.get(self.schema.hash_name)
        if not _typed(hash_value, self.schema.hash_type):
            return None
        assert hash_value is not None
        if self.schema.range_name is None:
            return sort_value(hash_value), (NO_RANGE, *table_key)
        range_value = item.get(self.schema.range_name)
        if not _typed(range_value, self.schema.range_type or ""):
            return None
        assert range_value is not None
        return sort_value(hash_value), (sort_value(range_value), *table_key)

    def add(self, item: Item, table_key: Key) -> None:
        """Index the item (when it has the index's keys)."""
        where = self.position(item, table_key)
        if where is not None:
            self.entries.setdefault(where[0], SortedList()).add(where[1])
            self.count += 1

    def remove(self, item: Item, table_key: Key) -> None:
        """Forget the item."""
        where = self.position(item, table_key)
        if where is None:
            return
        entries = self.entries.get(where[0])
        if entries is not None:
            entries.discard(where[1])
            self.count -= 1
            if not entries:
                del self.entries[where[0]]

    def projected(self, item: Item, table: KeySchema) -> Item:
        """The attributes of the item this index holds."""
        kind = self.projection.get("ProjectionType", "ALL")
        if kind == "ALL":
            return item
        names = set(table.names()) | set(self.schema.names())
        if kind == "INCLUDE":
            names.update(self.projection.get("NonKeyAttributes", []))
        return {name: value for name, value in item.items() if name in names}

    def wire(self, table_arn: str) -> dict[str, Any]:
        """The index as DescribeTable gives it."""
        found: dict[str, Any] = {
            "IndexName": self.name, "KeySchema": self.schema.wire(),
            "Projection": self.projection, "IndexSizeBytes": 0, "ItemCount": self.count,
            "IndexArn": f"{table_arn}/index/{self.name}"}
        if not self.local:
            found["IndexStatus"] = "ACTIVE"
            found["ProvisionedThroughput"] = {"ReadCapacityUnits": 0,
                                              "WriteCapacityUnits": 0,
                                              "NumberOfDecreasesToday": 0}
        return found


@dataclass
class Table:
    """A table: items by partition, then by sort key; its indexes; its settings."""

    name: str
    arn: str
    schema: KeySchema
    definitions: list[dict[str, str]]
    indexes: dict[str, Index]
    billing: str
    created: float = field(default_factory=time.time)
    partitions: dict[Any, SortedDict] = field(default_factory=dict)
    count: int = 0
    ttl_attribute: str | None = None
    stream_view: str | None = None
    stream_arn: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def key_of(self, item: Item, *, whole_item: bool) -> Key:
        """The item's (or the Key parameter's) position; ValidationException when a key
        attribute is missing, mistyped or empty, or a Key names other attributes."""
        schema = self.schema
        if not whole_item and len(item) != len(schema.names()):
            raise invalid("The provided key element does not match the schema")
        hash_value = self._key_value(item, schema.hash_name, schema.hash_type, whole_item)
        if schema.range_name is None:
            return hash_value, NO_RANGE
        return hash_value, self._key_value(item, schema.range_name, schema.range_type or "",
                                           whole_item)

    @staticmethod
    def _key_value(item: Item, name: str, expected: str, whole_item: bool) -> Any:
        value = item.get(name)
        if value is None:
            if whole_item:
                raise invalid(f"One or more parameter values were invalid: Missing the key "
                              f"{name} in the item")
            raise invalid("The provided key element does not match the schema")
        if not _typed(value, expected):
            actual = next(iter(value), "?") if isinstance(value, dict) else "?"
            if whole_item:
                raise invalid(f"One or more parameter values were invalid: Type mismatch "
                              f"for key {name} expected: {expected} actual: {actual}")
            raise invalid("The provided key element does not match the schema")
        inner = value[expected]
        if inner == "":
            raise invalid("One or more parameter values are not valid. The AttributeValue "
                          f"for a key attribute cannot contain an empty string value. "
                          f"Key: {name}")
        return sort_value(value)

    def check_index_keys(self, item: Item) -> None:
        """ValidationException when an index key attribute has the wrong type."""
        for index in self.indexes.values():
            for name, expected in ((index.schema.hash_name, index.schema.hash_type),
                                   (index.schema.range_name, index.schema.range_type)):
                value = item.get(name) if name is not None else None
                if value is not None and expected is not None and expected not in value:
                    actual = next(iter(value), "?")
                    raise invalid(
                        "One or more parameter values were invalid: Type mismatch for Index "
                        f"Key {name} Expected: {expected} Actual: {actual} IndexName: "
                        f"{index.name}")
                if value is not None and expected in ("S", "B") and value.get(expected) == "":
                    raise invalid(
                        "One or more parameter values are not valid. A value specified for "
                        f"a secondary index key is not supported. The AttributeValue for a "
                        f"key attribute cannot contain an empty string value. IndexName: "
                        f"{index.name}, IndexKey: {name}")

    def get(self, key: Key) -> Item | None:
        """The item at `key`, if any."""
        partition = self.partitions.get(key[0])
        return None if partition is None else partition.get(key[1])

    def put(self, key: Key, item: Item | None) -> Item | None:
        """Store `item` at `key` (None deletes); the item it replaced."""
        partition = self.partitions.get(key[0])
        old = None if partition is None else partition.get(key[1])
        if old is not None:
            for index in self.indexes.values():
                index.remove(old, key)
        if item is None:
            if old is not None and partition is not None:
                del partition[key[1]]
                self.count -= 1
                if not partition:
                    del self.partitions[key[0]]
        else:
            if partition is None:
                partition = self.partitions[key[0]] = SortedDict()
            if old is None:
                self.count += 1
            partition[key[1]] = item
            for index in self.indexes.values():
                index.add(item, key)
        return old

    def key_item(self, item: Item) -> Item:
        """Only the table's key attributes of the item."""
        return {name: item[name] for name in self.schema.names()}

    def items(self) -> Iterator[tuple[Key, Item]]:
        """Every item with its key, in no particular order."""
        for hash_value, partition in self.partitions.items():
            for range_value, item in partition.items():
                yield (hash_value, range_value), item
