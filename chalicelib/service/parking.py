"""Long polls that wait without a thread: parked by the local server.

A long poll that found nothing sleeps until a change concerns its queue. Asleep in its
thread, deep in the app (the server's frames, Chalice's, the protocol's, the service's,
about 34 in all, with the request's headers copied on the way), a waiting consumer cost
the local server about 65 KB. Where the request's server can park it (`parkable()`: the
local server, for a request its front door admitted), the receive raises `Parked`
instead of sleeping. The request unwinds to the server's `serving(...)`, which yields
the continuation: the server keeps the suspended serving (its own few frames, the front
door's admission still held) and the connection, lets the thread end, and asks the
continuation to call back (`watch`: at a change of the queue, or at the end of the
pause). Then a thread sends the serving on: the request is served again, and its receive
takes the continuation up (`take()`) where it stopped, with the same deadlines, its
place among its account's long polls kept, and its queue's rate not charged again
(`resumed()`). A parked consumer costs about 24 KB: its connection, its request and the
suspended serving.

`Parked` is a BaseException: the layers' `except Exception` (each protocol's error
answer, Chalice's) let it through, while their context managers still exit. Nothing is
metered, logged as served or answered for a serving that parked; the serving that
answers is counted once. On Lambda nothing parks: a container serves one request at a
time, and its long poll sleeps in it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from chalicelib.domain import fair_share

T = TypeVar("T")


class Watcher(Protocol):
    """Calls back once a change comes after a generation, or the timeout passes
    (`chalicelib.backend.wakeups.Wakeups.watch`)."""

    def watch(self, queue_id: str, seen: int, timeout_s: float,
              callback: Callable[[], None]) -> None: ...


@dataclass
class Continuation:
    """Where a parked long poll stopped: its deadlines, the retries it made, what it
    waits for next, and the end of its place among its account's long polls."""

    deadline_ms: int  # on the service's clock
    wall_deadline: float  # time.monotonic(): the wait ends even when the clock is faked
    failures: int = 0
    release: Callable[[], None] | None = None
    taken: bool = False  # a serving's receive took it up, and owns it
    # What it waits for: a change of the queue after generation `seen`, or `pause_s`.
    wakeups: Watcher | None = None
    queue_id: str = ""
    seen: int = 0
    pause_s: float = 0.0

    def park(self, wakeups: Watcher, queue_id: str, seen: int, pause_s: float) -> Parked:
        """The signal to raise: park until a change after `seen`, or `pause_s`."""
        self.wakeups, self.queue_id, self.seen, self.pause_s = wakeups, queue_id, seen, pause_s
        return Parked(self)

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, when the parked poll is to be served again."""
        if self.wakeups is None:
            callback()
            return
        self.wakeups.watch(self.queue_id, self.seen, self.pause_s, callback)

    def end(self) -> None:
        """The long poll is over: give its place back (once)."""
        release, self.release = self.release, None
        if release is not None:
            release()


class Parked(BaseException):
    """Raised by a long poll about to sleep where its server parks it."""

    def __init__(self, continuation: Continuation) -> None:
        super().__init__("a parked long poll")
        self.continuation = continuation


_PARKABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("dmq_parkable",
                                                                 default=False)
_RESUMING: contextvars.ContextVar[Continuation | None] = contextvars.ContextVar(
    "dmq_resuming", default=None)


@contextmanager
def parkable_here() -> Iterator[None]:
    """Around a request whose server catches `Parked` and serves it again."""
    token = _PARKABLE.set(True)
    try:
        yield
    finally:
        _PARKABLE.reset(token)


def parkable() -> bool:
    """True when a long poll of this request may park rather than sleep."""
    return _PARKABLE.get()


@contextmanager
def resuming(continuation: Continuation | None) -> Iterator[None]:
    """Around one serving of a request: the continuation of its parked long poll (None
    for its first serving). A continuation that no receive took up (the serving failed
    before it, the queue gone) ends there."""
    if continuation is not None:
        continuation.taken = False
    token = _RESUMING.set(continuation)
    try:
        yield
    finally:
        _RESUMING.reset(token)
        if continuation is not None and not continuation.taken:
            continuation.end()


def resumed() -> bool:
    """True while a parked long poll is served again (its checks were made already)."""
    continuation = _RESUMING.get()
    return continuation is not None and not continuation.taken


def take() -> Continuation | None:
    """The continuation of this request's parked long poll, taken up by its receive."""
    continuation = _RESUMING.get()
    if continuation is None or continuation.taken:
        return None
    continuation.taken = True
    return continuation


def serving(serve: Callable[[], T]) -> Generator[Continuation, None, T]:
    """`serve()`, as a generator that yields the continuation of each long poll that parks
    in it and serves the request again when sent on (`next`/`send(None)`), until it gives
    `serve()`'s answer. While parked, the request gives its place in its account's
    concurrency share back, as a sleeping long poll does."""
    continuation: Continuation | None = None
    while True:
        try:
            with resuming(continuation):
                return serve()
        except Parked as parked:
            continuation = parked.continuation
        try:
            with fair_share.idle():
                yield continuation
        except BaseException:  # closed while parked (the server stops, the peer is gone)
            continuation.end()
            raise
