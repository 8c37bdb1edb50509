"""An account's concurrency share: how many of its requests one process serves at once.

A token bucket bounds how many requests an account makes per second; it does not bound
how many run at the same time, and on a small machine that is what a flood takes from the
others: threads, the interpreter and the store. `ConcurrencyShare` counts each account's
requests in progress and refuses one past the cap, before any work is done for it.

A request over its account's share waits its turn for a short while before it is refused,
so a flooder's extra requests cost sleeping threads, not refusals it would send again at
once. A request that waits without working (a long poll between reads) gives its place back
while it waits and takes it again after (`idle()`), so an account's long-polling
consumers do not use up its share.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# How long a request over its account's share waits for its turn before it is refused.
TURN_WAIT_S = 2.0


class ConcurrencyShare:
    """Requests in progress per account, capped at `limit` each (0: no cap). A request
    over the cap waits its turn, up to `wait_s`, for one of the account's requests to end:
    a client that runs more requests at once than its share gets them served in turn,
    and a flooder's extra requests wait without costing anything but a sleeping thread."""

    def __init__(self, limit: int, wait_s: float = 0.0) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._turns: dict[str, threading.Condition] = {}  # the waiters of each account
        self._waiting: dict[str, int] = {}

    def enter(self, account: str, force: bool = False) -> bool:
        """Count one more request of the account, waiting up to `wait_s` for room; False
        (and nothing counted) when there was none. `force`: count it whatever the cap."""
        deadline = time.monotonic() + self.wait_s
        with self._lock:
            while not force and self.limit and self._running.get(account, 0) >= self.limit:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wait(account, remaining)
            self._running[account] = self._running.get(account, 0) + 1
            return True

    def _wait(self, account: str, timeout_s: float) -> None:
        """Wait (the lock held) for one of the account's requests to end."""
        turn = self._turns.setdefault(account, threading.Condition(self._lock))
        self._waiting[account] = self._waiting.get(account, 0) + 1
        try:
            turn.wait(timeout_s)
        finally:
            self._waiting[account] -= 1
            if not self._waiting[account]:
                del self._waiting[account]
                del self._turns[account]

    def leave(self, account: str) -> None:
        """A request of the account ended (or went idle): the next waiter may go."""
        with self._lock:
            running = self._running.get(account, 0) - 1
            if running > 0:
                self._running[account] = running
            else:
                self._running.pop(account, None)
            turn = self._turns.get(account)
            if turn is not None:
                turn.notify()

    def running(self, account: str) -> int:
        """The account's requests in progress."""
        with self._lock:
            return self._running.get(account, 0)


@dataclass(frozen=True)
class _Held:
    share: ConcurrencyShare
    account: str


_HELD: contextvars.ContextVar[_Held | None] = contextvars.ContextVar("dmq_share", default=None)


@contextmanager
def holding(share: ConcurrencyShare, account: str) -> Iterator[None]:
    """Mark the current request as holding a place of the account's share (taken by the
    caller), so that `idle()` can give it back while the request waits."""
    token = _HELD.set(_Held(share, account))
    try:
        yield
    finally:
        _HELD.reset(token)


@contextmanager
def idle() -> Iterator[None]:
    """Around a wait that does no work: the request's place is given back for the wait
    and taken again after it (past the cap if need be: the request is already served)."""
    held = _HELD.get()
    if held is None:
        yield
        return
    held.share.leave(held.account)
    try:
        yield
    finally:
        held.share.enter(held.account, force=True)
