"""A clock the tests move by hand (the product's clocks are in `chalicelib.clock`)."""

from __future__ import annotations

import threading


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
