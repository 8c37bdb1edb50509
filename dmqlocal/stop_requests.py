"""How signals and the store's watch thread ask the main thread to stop.

A signal handler may run between any two bytecodes of the main thread, including inside
a lock's own code, so it must take no lock (a `threading.Event.set()` in a handler can
deadlock on the Event's lock). Here a handler only counts; the wake-up is one byte that
Python's C-level handler writes to a pipe (`signal.set_wakeup_fd`). The watch thread
records the store's exit code and writes a byte to the same pipe. The main thread sleeps
in `select()` on the pipe and does everything else.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequests:
    """Stop requests: how many signals came, and whether the store died (its exit code)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self.signals = 0
        self.store_exit: int | None = None

    def install(self) -> None:
        """Take SIGINT and SIGTERM (in the main thread, before anything else)."""
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for number in SIGNALS:
            signal.signal(number, self._count)

    def _count(self, signum: int, frame: FrameType | None) -> None:
        """The handler: a counter, nothing that can block."""
        self.signals += 1

    @property
    def requested(self) -> bool:
        """True once a signal came or the store died."""
        return self.signals > 0 or self.store_exit is not None

    def store_exited(self, code: int) -> None:
        """From the store's watch thread: the store process ended with `code`."""
        self.store_exit = code
        self.wake()

    def wake(self) -> None:
        """Wake the main thread (from any thread)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, b"\0")

    def wait(self, timeout_s: float) -> None:
        """Sleep until a request, a wake-up or the timeout, whichever comes first."""
        select.select([self._read], [], [], timeout_s)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read, 512):
                pass
