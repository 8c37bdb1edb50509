"""A background loop: a daemon thread that runs an action every so many seconds, and ends
as soon as it is told to stop (the scheduler's tick, the export timers, DynamoDB Local's
file syncs)."""

from __future__ import annotations

import threading
from collections.abc import Callable

# A number of seconds, or a function that gives it (asked in the loop's thread).
Seconds = float | Callable[[], float]


class PeriodicLoop:
    """Waits `period_s`, runs `action`, and again, in a daemon thread named `name`.

    `first_wait_s`, when given, is the wait before the first run instead of the period.
    Either may be a function, asked before each wait in the loop's thread (so a slow
    answer never holds up `start`). `stop()` ends a wait at once; an action under way runs
    to its end, and `stop` waits at most `join_timeout_s` for it. The action handles its
    own errors: one it raises ends the loop.
    """

    def __init__(self, name: str, action: Callable[[], object], period_s: Seconds,
                 join_timeout_s: float, first_wait_s: Seconds | None = None) -> None:
        self.name = name
        self._action = action
        self._period_s = period_s
        self._first_wait_s = first_wait_s
        self._join_timeout_s = join_timeout_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """Whether the loop has been told to stop."""
        return self._stopping.is_set()

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Tell the loop to stop; then, unless `wait` is False, wait for its thread (see
        `join`)."""
        self._stopping.set()
        if wait:
            self.join()

    def join(self) -> None:
        """Wait for the thread to end, at most `join_timeout_s`."""
        if self._thread is not None:
            self._thread.join(timeout=self._join_timeout_s)

    def _run(self) -> None:
        first = self._first_wait_s if self._first_wait_s is not None else self._period_s
        pause = _seconds(first)
        while not self._stopping.wait(pause):
            self._action()
            pause = _seconds(self._period_s)


def _seconds(value: Seconds) -> float:
    return value() if callable(value) else value
