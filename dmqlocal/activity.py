"""What an idle local server does not do: the background loops slow down when nothing
happens, and the requests the server handles wake them up again.

The stream pump backs off to one GetRecords round every `StreamPump.IDLE_CAP_S` while its
streams are quiet, the move task pass and the push supervisor run rarely while nothing
runs, and the table watch lists tables on a slow timer. A request to the server (a send,
a StartMessageMoveTask) may make work for the pump or the move task pass, so the
server's front door calls `Activity.touch` when it takes one and again when it has served
it (what the request wrote is in the store by then): the pump reads again at once, and
the move task pass runs at the next scheduler tick if the request started a task (the
scheduler asks the pass whether it is busy; any other request costs it nothing). The push
supervisor is told by the subscription service itself when a subscription is created or
deleted. Writes made by another process on the same store are seen at the idle pace (at
most `StreamPump.IDLE_CAP_S` later for the pump).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from dmqlocal.http_errors import Reply

Gate = Callable[[str, str, dict[str, str], bytes], AbstractContextManager[Reply | None]]


class Activity:
    """Calls its listeners (cheap, non-blocking wake-ups) whenever a request comes in.

    A touch takes no lock: every request touches twice, and one lock taken by every
    request formed a convoy under load (a thread woken holding it waited for the
    interpreter, and the server's other requests queued behind it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # for subscribers only
        self._listeners: tuple[Callable[[], None], ...] = ()
        self._drawn = itertools.count(1)
        self._touches = 0

    @property
    def touches(self) -> int:
        """Two per request: when it comes in and when it is served (approximate while
        requests run at once)."""
        return self._touches

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call `listener` on every request from now on."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def touch(self) -> None:
        """A request came in: wake every listener."""
        self._touches = next(self._drawn)
        for listener in self._listeners:
            listener()

    def gate(self, inner: Gate) -> Gate:
        """The server's gate, touching this activity before and after each request."""

        @contextmanager
        def gate(method: str, target: str, headers: dict[str, str],
                 body: bytes) -> Iterator[Reply | None]:
            self.touch()
            try:
                with inner(method, target, headers, body) as refused:
                    yield refused
            finally:
                self.touch()

        return gate
