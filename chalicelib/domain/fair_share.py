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

Waiting long polls cost no thread of the share, but each holds a connection, and the
server keeps a bounded number of those. So an account's long polls in progress are capped
too (`max_waits`, `long_poll()`): past its cap a long poll is refused at once, before any
work, rather than taking the connections other accounts need.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

# How long a request over its account's share waits for its turn before it is refused.
TURN_WAIT_S = 2.0


class WaitShareExceeded(Exception):
    """An account already has as many long polls in progress as its share allows."""

    def __init__(self, account: str, limit: int) -> None:
        super().__init__(
            f"Too many long polls of account {account} in progress (at most {limit} at "
            "once); retry with backoff, or wait with fewer consumers.")
        self.account = account
        self.limit = limit


class _Account:
    """One account's counts, under a lock of its own: accounts do not queue on each other."""

    __slots__ = ("lock", "polls", "running", "turn", "waiting")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turn = threading.Condition(self.lock)  # the requests waiting for room
        self.running = 0
        self.polls = 0  # long polls in progress
        self.waiting = 0

    def idle(self) -> bool:
        return not (self.running or self.polls or self.waiting)


class ConcurrencyShare:
    """Requests in progress per account, capped at `limit` each (0: no cap). A request
    over the cap waits its turn, up to `wait_s`, for one of the account's requests to end:
    a client that runs more requests at once than its share gets them served in turn,
    and a flooder's extra requests wait without costing anything but a sleeping thread.
    Long polls in progress are capped at `max_waits` per account (0: no cap).

    Only what is capped is counted: without a cap a request takes no lock here. Each
    account has its own lock, so one account's requests never wait on another's. (Under
    the interpreter's global lock, one lock taken by every request of the server formed
    a convoy under load: a thread woken holding it waited for the interpreter, and
    every other request queued behind it, hundreds at a time.)"""

    def __init__(self, limit: int, wait_s: float = 0.0, max_waits: int = 0) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self.max_waits = max_waits
        self._accounts: dict[str, _Account] = {}

    def _locked(self, account: str) -> _Account:
        """The account's counts, their lock held (made at first use)."""
        while True:
            state = self._accounts.get(account)
            if state is None:
                state = self._accounts.setdefault(account, _Account())
            state.lock.acquire()
            if self._accounts.get(account) is state:
                return state
            state.lock.release()  # dropped while this waited for it: take the new one

    def _unlock(self, account: str, state: _Account) -> None:
        """Release the account's lock, dropping its counts when nothing is counted (a
        thread that fetched them meanwhile sees that and takes the new ones)."""
        if state.idle():
            self._accounts.pop(account, None)
        state.lock.release()

    def enter(self, account: str, force: bool = False) -> bool:
        """Count one more request of the account, waiting up to `wait_s` for room; False
        (and nothing counted) when there was none. `force`: count it whatever the cap."""
        if not self.limit:
            return True
        deadline = time.monotonic() + self.wait_s
        state = self._locked(account)
        try:
            while not force and state.running >= self.limit:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                state.waiting += 1
                try:
                    state.turn.wait(remaining)
                finally:
                    state.waiting -= 1
            state.running += 1
            return True
        finally:
            self._unlock(account, state)

    def leave(self, account: str) -> None:
        """A request of the account ended (or went idle): the next waiter may go."""
        if not self.limit:
            return
        state = self._locked(account)
        try:
            state.running = max(0, state.running - 1)
            if state.waiting:
                state.turn.notify()
        finally:
            self._unlock(account, state)

    def running(self, account: str) -> int:
        """The account's requests in progress (0 where nothing is capped)."""
        state = self._accounts.get(account)
        return 0 if state is None else state.running

    def start_poll(self, account: str) -> None:
        """Count one more long poll of the account; WaitShareExceeded (nothing counted)
        when it has `max_waits` in progress already."""
        if not self.max_waits:
            return
        state = self._locked(account)
        try:
            if state.polls >= self.max_waits:
                raise WaitShareExceeded(account, self.max_waits)
            state.polls += 1
        finally:
            self._unlock(account, state)

    def end_poll(self, account: str) -> None:
        """A long poll of the account ended."""
        if not self.max_waits:
            return
        state = self._locked(account)
        try:
            state.polls = max(0, state.polls - 1)
        finally:
            self._unlock(account, state)

    def polls(self, account: str) -> int:
        """The account's long polls in progress (0 where they are not capped)."""
        state = self._accounts.get(account)
        return 0 if state is None else state.polls


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


def start_long_poll(waits: bool) -> Callable[[], None] | None:
    """Count a receive that may wait (`waits`) as one of its account's long polls until
    the returned release is called (None: nothing was counted); WaitShareExceeded, with
    nothing counted, when the account has its share of them in progress already. Outside
    a request's share, nothing is counted."""
    held = _HELD.get()
    if not waits or held is None:
        return None
    held.share.start_poll(held.account)
    return functools.partial(held.share.end_poll, held.account)


@contextmanager
def long_poll(waits: bool) -> Iterator[None]:
    """`start_long_poll` around a receive that may wait."""
    release = start_long_poll(waits)
    try:
        yield
    finally:
        if release is not None:
            release()
