"""One store's tables and streams (the store keeps one per access key and region, as
DynamoDB Local does without `-sharedDb`), and the single place items change: every
write updates the table, its indexes, its stream and the TTL queue together."""

from __future__ import annotations

import heapq
import time
from decimal import Decimal, InvalidOperation
from typing import Any

from dmqlocal.memstore.errors import StoreError, not_found
from dmqlocal.memstore.streams import Stream
from dmqlocal.memstore.tables import Key, Table
from dmqlocal.memstore.values import Item

ACCOUNT = "000000000000"
# DynamoDB's TTL leaves alone an item whose expiry is more than five years past (a time
# in seconds that is not one, a test's clock near 1970).
TTL_IGNORED_BEFORE_S = 5 * 365 * 24 * 3600


def _expiry(item: Item | None, attribute: str) -> float | None:
    value = None if item is None else item.get(attribute)
    if value is None or "N" not in value:
        return None
    try:
        return float(Decimal(value["N"]))
    except (InvalidOperation, ValueError):
        return None


class Database:
    """The tables and streams of one access key in one region."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.tables: dict[str, Table] = {}
        self.streams: dict[str, Stream] = {}
        self._ttl: list[tuple[float, str, Key]] = []  # (expires at, table, key), stale ok

    def arn(self, table: str) -> str:
        """A table's ARN."""
        return f"arn:aws:dynamodb:{self.region}:{ACCOUNT}:table/{table}"

    def table(self, name: Any) -> Table:
        """The named table, or ResourceNotFoundException."""
        found = self.tables.get(name) if isinstance(name, str) else None
        if found is None:
            raise not_found()
        return found

    def stream(self, arn: Any) -> Stream:
        """The stream with this ARN, or ResourceNotFoundException."""
        found = self.streams.get(arn) if isinstance(arn, str) else None
        if found is None:
            raise not_found(f"Stream: {arn} not found")
        return found

    def write(self, table: Table, key: Key, new: Item | None, old: Item | None,
              by_service: bool = False) -> None:
        """Replace `old` (the item at `key`, or None) by `new` (None deletes), with its
        stream record and TTL entry. Nothing happens when nothing changes."""
        if new == old:
            return
        table.put(key, new)
        if table.stream_arn is not None:
            name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
            source = new if new is not None else old
            assert source is not None
            self.streams[table.stream_arn].append(name, table.key_item(source), old, new,
                                                  by_service)
        if table.ttl_attribute is not None:
            expires = _expiry(new, table.ttl_attribute)
            if expires is not None and expires >= time.time() - TTL_IGNORED_BEFORE_S:
                heapq.heappush(self._ttl, (expires, table.name, key))
                if len(self._ttl) > 2 * self._ttl_items() + 10_000:
                    self.rebuild_ttl()

    def _ttl_items(self) -> int:
        return sum(t.count for t in self.tables.values() if t.ttl_attribute is not None)

    def rebuild_ttl(self) -> None:
        """The TTL queue made again from the items (drops entries of changed items)."""
        entries = []
        for table in self.tables.values():
            if table.ttl_attribute is None:
                continue
            for key, item in table.items():
                expires = _expiry(item, table.ttl_attribute)
                if expires is not None:
                    entries.append((expires, table.name, key))
        heapq.heapify(entries)
        self._ttl = entries

    def expire(self, now: float | None = None, budget: int = 1000) -> int:
        """Delete up to `budget` items whose TTL has passed, as DynamoDB's TTL does (a
        REMOVE record by the service; not an item whose expiry is over five years past);
        how many were deleted."""
        now = time.time() if now is None else now
        deleted = 0
        while self._ttl and self._ttl[0][0] <= now and deleted < budget:
            _, name, key = heapq.heappop(self._ttl)
            table = self.tables.get(name)
            if table is None or table.ttl_attribute is None:
                continue
            item = table.get(key)
            expires = _expiry(item, table.ttl_attribute)
            if (item is not None and expires is not None
                    and now - TTL_IGNORED_BEFORE_S <= expires <= now):
                self.write(table, key, None, item, by_service=True)
                deleted += 1
        return deleted

    def forget_streams(self, now: float) -> None:
        """Drop streams closed over 24 hours ago."""
        for arn in [arn for arn, s in self.streams.items() if s.expired(now)]:
            del self.streams[arn]


def in_use(table: str) -> StoreError:
    """ResourceInUseException for a table."""
    return StoreError("ResourceInUseException", f"Table already exists: {table}")
