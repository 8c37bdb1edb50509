"""A bulkhead: at most N store calls at once to one cluster. A call that finds every slot
taken fails at once (or after a short, bounded wait), so a stalled cluster holds at most N
server threads and the others stay free for the other clusters."""

from __future__ import annotations

import threading
import time


class Bulkhead:
    """Bounded concurrent calls. `limit` 0 admits every call (no bulkhead)."""

    def __init__(self, limit: int, max_wait_s: float = 0.0) -> None:
        self.limit = limit
        self.max_wait_s = max_wait_s
        self._in_use = 0
        self._free = threading.Condition(threading.Lock())

    def try_acquire(self) -> bool:
        """Take a slot: True, or False when all stay taken for `max_wait_s`."""
        if self.limit <= 0:
            return True
        with self._free:
            if self._in_use < self.limit:
                self._in_use += 1
                return True
            if self.max_wait_s <= 0:
                return False
            deadline = time.monotonic() + self.max_wait_s
            while self._in_use >= self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._free.wait(left)
            self._in_use += 1
            return True

    def release(self) -> None:
        """Give a slot back (once per successful `try_acquire`)."""
        if self.limit <= 0:
            return
        with self._free:
            self._in_use = max(0, self._in_use - 1)
            self._free.notify()

    @property
    def in_use(self) -> int:
        """The slots taken now."""
        with self._free:
            return self._in_use
