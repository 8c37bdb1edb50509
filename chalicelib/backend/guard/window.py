"""A count-based sliding window of call outcomes: the last N calls, failed or not, slow or
not, with running totals so that every rate is read in constant time."""

from __future__ import annotations

_FAILED = 1
_SLOW = 2


class OutcomeWindow:
    """The outcomes of the last `size` calls. Not thread-safe: the breaker that owns it
    reads and writes it under its lock."""

    def __init__(self, size: int) -> None:
        self._ring = [0] * size
        self._next = 0
        self._calls = 0
        self._failed = 0
        self._slow = 0

    def add(self, failed: bool, slow: bool) -> None:
        """Record one call, pushing the oldest out once the window is full."""
        if self._calls == len(self._ring):
            self._count(self._ring[self._next], -1)
        else:
            self._calls += 1
        flags = (_FAILED if failed else 0) | (_SLOW if slow else 0)
        self._ring[self._next] = flags
        self._count(flags, 1)
        self._next = (self._next + 1) % len(self._ring)

    def _count(self, flags: int, step: int) -> None:
        if flags & _FAILED:
            self._failed += step
        if flags & _SLOW:
            self._slow += step

    def clear(self) -> None:
        """Forget every call (a new breaker state starts a new window)."""
        self._ring = [0] * len(self._ring)
        self._next = self._calls = self._failed = self._slow = 0

    @property
    def calls(self) -> int:
        """How many calls the window holds."""
        return self._calls

    @property
    def failure_rate_pct(self) -> float:
        """Failed calls, as a percentage of the calls held (0 when empty)."""
        return 100.0 * self._failed / self._calls if self._calls else 0.0

    @property
    def slow_call_rate_pct(self) -> float:
        """Slow calls (failed or not), as a percentage of the calls held (0 when empty)."""
        return 100.0 * self._slow / self._calls if self._calls else 0.0
