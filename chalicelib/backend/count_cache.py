"""The count items a process has read, kept for as long as it follows every change to them.

A shard's count item changes only when a stream handler counts records in
(`ShardCounters.apply_records`) or the retention sweep releases the shard. On the local
server one pump per region reads every record of the region's streams and counts them in
itself, so while it follows them (`changes_followed`: read up to a few seconds ago) it
sees every change of every count item, its own or another server's over the same store:
an item read since its shard's last change is still what the store holds. Reading it
again is a store request that can only return the same item; this cache answers instead,
so that a GetQueueAttributes, a metrics rendering or the console's list costs no store
request for the shards that counted nothing since their last read.

The ordering that keeps it exact: a reader takes the tick before its read (`begin`), and
the counter marks a shard changed (`changed`, which advances the tick) after its write.
An entry is good only while its shard's last change is no later than the tick its read
began at: a write that ends after the read began, whether the read saw it or not, makes
the entry void. Where nothing follows the streams (Lambda, where each container counts
only the batches it is handed, or a pump that is behind), `begin` answers None and every
read goes to the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Item = dict[str, Any]
LIMIT = 50_000  # shards whose items one process keeps (and whose changes it remembers)


class CountItemCache:
    """Count items by key, each with the tick its read began at."""

    def __init__(self, followed: Callable[[], bool], limit: int = LIMIT) -> None:
        self._followed = followed
        self._limit = limit
        self._lock = threading.Lock()
        self._tick = 0
        self._floor = 0  # entries whose read began before this are void (after a clear)
        self._changed: dict[str, int] = {}  # key: the tick of its last change
        self._items: dict[str, tuple[int, list[Item]]] = {}

    def begin(self) -> int | None:
        """The tick to read at, or None when this process does not follow every change
        (the read then goes to the store and is not kept)."""
        if not self._followed():
            return None
        return self._tick

    def get(self, key: str) -> list[Item] | None:
        """The items kept for `key` (an empty list: the store held none), or None when
        there is no good entry."""
        entry = self._items.get(key)
        if entry is None:
            return None
        began, found = entry
        if began < self._floor or self._changed.get(key, -1) > began:
            return None
        return found

    def put(self, began: int, key: str, found: list[Item]) -> None:
        """Keep what a read that began at `began` found for `key`."""
        with self._lock:
            if began < self._floor or self._changed.get(key, -1) > began:
                return
            if len(self._items) >= self._limit and key not in self._items:
                self._items.clear()
            self._items[key] = (began, found)

    def changed(self, key: str) -> None:
        """A write to `key`'s item has ended (or failed, which may have written it)."""
        with self._lock:
            self._tick += 1
            if len(self._changed) >= self._limit and key not in self._changed:
                self._changed.clear()
                self._items.clear()
                self._floor = self._tick
            self._changed[key] = self._tick
