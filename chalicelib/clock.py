"""Injected clocks: domain code asks a clock for the time instead of reading it."""

from __future__ import annotations

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
