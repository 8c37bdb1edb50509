"""Values read from the store, kept for as long as this process sees every change to them.

Some items change only through writes this process sees: on the local server one stream
pump per region reads every record of the region's streams (its own writes and another
server's over the same store), so while it follows them (read up to a few seconds ago)
an item read since its key's last change is still what the store holds. Reading it again
is a store request that can only return the same item; the cache answers instead.

The ordering that keeps it exact: a reader takes the tick before its read (`begin`), and
whoever sees a change marks its key (`changed`, which advances the tick) after the write
ended or its stream record was read. An entry is good only while its key's last change
is no later than the tick its read began at: a change marked after the read began,
whether the read saw it or not, makes the entry void. Where nothing follows every change
(Lambda, where each container sees only the batches it is handed, or a pump that is
behind), `following()` is false and each user decides what an entry is still worth (the
count items go to the store; the queue records keep their time-to-live).

Used for the shards' count items (`backend/counters.py`) and the queue records
(`metadata/repository.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")
LIMIT = 50_000  # keys whose values one cache keeps (and whose changes it remembers)


class FollowedCache(Generic[V]):
    """Values by key, each with the tick its read began at."""

    def __init__(self, followed: Callable[[], bool], limit: int = LIMIT) -> None:
        self._followed = followed
        self._limit = limit
        self._lock = threading.Lock()
        self._tick = 0
        self._floor = 0  # entries whose read began before this are void (after a clear)
        self._changed: dict[str, int] = {}  # key: the tick of its last change
        self._values: dict[str, tuple[int, V]] = {}

    def following(self) -> bool:
        """Whether this process sees every change now."""
        return self._followed()

    def tick(self) -> int:
        """The tick a read that begins now takes (whether or not changes are followed)."""
        return self._tick

    def begin(self) -> int | None:
        """The tick to read at, or None when this process does not follow every change
        (the read then goes to the store and is not kept)."""
        if not self._followed():
            return None
        return self._tick

    def get(self, key: str) -> V | None:
        """The value kept for `key`, or None when there is no good entry (a value read
        before the key's last change is not good)."""
        entry = self._values.get(key)
        if entry is None:
            return None
        began, value = entry
        if began < self._floor or self._changed.get(key, -1) > began:
            return None
        return value

    def put(self, began: int, key: str, value: V) -> None:
        """Keep what a read that began at `began` found for `key`."""
        with self._lock:
            if began < self._floor or self._changed.get(key, -1) > began:
                return
            if len(self._values) >= self._limit and key not in self._values:
                self._values.clear()
            self._values[key] = (began, value)

    def changed(self, key: str) -> None:
        """A write to `key`'s item has ended (or failed, which may have written it), or
        its stream record was read."""
        with self._lock:
            self._tick += 1
            if len(self._changed) >= self._limit and key not in self._changed:
                self._changed.clear()
                self._values.clear()
                self._floor = self._tick
            self._changed[key] = self._tick
