"""Injected clocks: domain code asks a clock for the time instead of reading it."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Source of the current time in epoch milliseconds."""

    def now_ms(self) -> int:
        """Return the current time in epoch milliseconds."""
        ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        """Return the wall-clock time in epoch milliseconds."""
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that tests move by hand."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """Return the fake time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the fake time forward."""
        with self._lock:
            self._now += int(seconds * 1000)
