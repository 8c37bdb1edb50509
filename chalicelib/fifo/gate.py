"""Whether a FIFO shard made by a resharding may deliver yet: only once every ancestor
still in the queue's shard map has stopped taking sends and is empty, so that a group's
older messages (in its old shard) all go before its newer ones (`fifo.ranges`).

An ancestor past its switch takes no message again, so once it is seen empty it stays
empty: this process remembers that for good, and asks the store again about one that
was not empty at most every `RECHECK_MS`. A receive pays one index Query of one key
per waiting ancestor, at most that often, and nothing once they are drained.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from chalicelib.domain.queues import QueueRecord, Shard
from chalicelib.fifo import ranges as fifo_ranges

# An ancestor's switch is this far in the past before its emptiness counts: senders
# whose clocks run behind may still put a message in it until then.
CLOCK_SKEW_MS = 1_000
RECHECK_MS = 500
# Drained ancestors this process remembers, at most (a forgotten one is asked again).
REMEMBERED = 10_000

IsEmpty = Callable[[str, Shard], bool]


class DrainGate:
    """Answers `delivers(queue, shard)`, asking `is_empty(queue id, shard)` of the store."""

    def __init__(self, is_empty: IsEmpty) -> None:
        self._is_empty = is_empty
        self._drained: set[tuple[str, int, int]] = set()
        self._waiting: dict[tuple[str, int, int], int] = {}  # -> when to ask again
        self._lock = threading.Lock()

    def delivers(self, queue: QueueRecord, shard: Shard, now_ms: int) -> bool:
        """True when the shard has no ancestor that may still hold a message."""
        if not shard.parents:
            return True
        return all(self._drained_by(queue, a, now_ms)
                   for a in fifo_ranges.ancestors(queue.shards, shard))

    def _drained_by(self, queue: QueueRecord, ancestor: Shard, now_ms: int) -> bool:
        if not ancestor.draining or now_ms < ancestor.draining_since_ms + CLOCK_SKEW_MS:
            return False
        key = (queue.queue_id, ancestor.id, ancestor.draining_since_ms)
        with self._lock:
            if key in self._drained:
                return True
            if self._waiting.get(key, 0) > now_ms:
                return False
        empty = self._is_empty(queue.queue_id, ancestor)
        with self._lock:
            if empty:
                if len(self._drained) >= REMEMBERED:
                    self._drained.clear()
                self._drained.add(key)
                self._waiting.pop(key, None)
            else:
                if len(self._waiting) >= REMEMBERED:
                    self._waiting.clear()
                self._waiting[key] = now_ms + RECHECK_MS
        return empty
