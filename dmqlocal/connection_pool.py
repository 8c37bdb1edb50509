"""The local server's open connections: idle ones cost no thread, and there is a cap.

A connection waits for its next request in one selector (epoll), not in a thread of its
own. When bytes arrive it gets a thread, which serves its requests for as long as they
keep coming (within `HOT_S` of each other), then gives it back to the selector. So
thousands of idle keep-alive connections cost file descriptors, not threads; threads are
bounded by the connections at work.

At most `max_open` connections are kept. A new one beyond that closes the connection
that has been idle longest; when none is idle (every one is at work), the new one is
refused: answered 503 in the SQS shape and closed. A connection idle for
`idle_timeout_s` is closed.

One thread (`dmq-http-idle`) owns the selector; other threads hand it work through a
queue and a wake-up socket, so the selector is never changed from two threads at once.

A connection whose long poll parks (`chalicelib/service/parking.py`) is held without a
thread too, outside the selector (it is at work, not idle: never evicted, never timed
out), until its wake-up calls back: it then gets a thread again, which serves the rest.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import resource
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dmqlocal.http_errors import sqs_error

logger = logging.getLogger("dmq.local")
# A thread that served a connection waits this long for the next one before it ends: a
# connection that becomes ready (a parked long poll woken, an idle one sending) is handed
# to a waiting thread, not to a new one. Starting a thread waits until the new thread
# runs, and on a busy server that wait fell on whoever woke the poll: the stream pump
# (seconds a batch, so it fell behind the stream) or a SendMessage.
# At most WORKER_IDLE_MAX threads wait at once: past that a thread ends when its work does.
WORKER_IDLE_S = 0.5
WORKER_IDLE_MAX = 32
# A connection whose next request comes within this long keeps its thread.
HOT_S = 0.05
# File descriptors kept free besides the connections (files, logs, the background work).
SPARE_FDS = 256
# A connection at work may hold one to the store as well: the store clients' pools grow
# with the connection cap (chalicelib.aws.store_concurrency).
FDS_PER_CONNECTION = 2
BUSY_MESSAGE = "DMQ has as many connections open as it keeps; retry the request."


def fd_room(wanted: int) -> int:
    """How many connections the process can hold: `wanted`, raising the soft limit on open
    files towards the hard one if need be (two for each connection: its own, and one to
    the store), else as many as that limit leaves room for."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted * FDS_PER_CONNECTION + SPARE_FDS
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        if soft < needed:
            room = max(1, (soft - SPARE_FDS) // FDS_PER_CONNECTION)
            logger.warning("only %d open files allowed: keeping at most %d connections, not "
                           "%d (DMQ_HTTP_MAX_CONNECTIONS)", soft, room, wanted)
            return room
    return wanted


def refuse(sock: socket.socket) -> None:
    """Answer a connection beyond the cap with 503 (SQS's ServiceUnavailable, which SDKs
    retry) and close it, without waiting on the client. TLS connections, whose handshake
    has not begun, are just closed."""
    if isinstance(sock, ssl.SSLSocket):
        sock.close()
        return
    status, headers, body = sqs_error(503, BUSY_MESSAGE, "ServiceUnavailable")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    data = (f"HTTP/1.1 {status} Service Unavailable\r\n{head}Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("latin-1") + body
    try:
        sock.setblocking(False)
        sock.send(data)
        sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(BlockingIOError):  # what the client sent already:
            sock.recv(65536)  # unread bytes at close would reset the answer away
    except OSError:
        pass
    finally:
        sock.close()


@dataclass(eq=False)
class PooledConnection:
    """One accepted connection, and what the server keeps for it between requests."""

    sock: socket.socket
    address: Any
    state: Any = None
    idle_until: float = 0.0


class Parked(Protocol):
    """A request that waits without a thread: it calls back once, to be served on."""

    def watch(self, callback: Callable[[], None]) -> None: ...


# True: keep the connection (it went idle); False: close it; Parked: wait for its call.
Serve = Callable[[PooledConnection], "bool | Parked"]


class ConnectionPool:
    """Holds idle connections in a selector and gives each a thread when it has work."""

    def __init__(self, serve: Serve, close: Callable[[PooledConnection], None],
                 refuse: Callable[[socket.socket], None], max_open: int,
                 idle_timeout_s: float) -> None:
        self._serve, self._close, self._refuse = serve, close, refuse
        self.max_open = max_open
        self.idle_timeout_s = idle_timeout_s
        self._lock = threading.Lock()
        self._open = 0  # accepted and not closed yet, wherever they are
        self._active = 0
        self._parked = 0  # connections whose request waits, parked, without a thread
        self._inbox: collections.deque[tuple[PooledConnection, bool]] = collections.deque()
        self._idle: collections.OrderedDict[int, PooledConnection] = collections.OrderedDict()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._stopping = threading.Event()
        self._ready: collections.deque[PooledConnection] = collections.deque()
        self._handoff = threading.Condition(threading.Lock())
        self._idle_workers = 0  # threads waiting for a ready connection
        self._thread = threading.Thread(target=self._loop, name="dmq-http-idle", daemon=True)
        self.refused = 0
        self.evicted = 0

    def start(self) -> None:
        """Start the selector thread."""
        self._thread.start()

    def stop(self) -> None:
        """Close every idle connection and stop; connections at work close when done."""
        self._stopping.set()
        self._wake()
        with self._handoff:
            self._handoff.notify_all()
        self._thread.join(timeout=5)

    def counts(self) -> tuple[int, int, int]:
        """(open, idle, at work) connections right now (at work: parked ones too)."""
        with self._lock:
            return self._open, len(self._idle), self._active + self._parked

    def parked(self) -> int:
        """Connections whose long poll waits, parked, without a thread."""
        with self._lock:
            return self._parked

    # -- other threads ------------------------------------------------------------------
    def offer(self, sock: socket.socket, address: Any) -> None:
        """A newly accepted connection (from the accepting thread)."""
        with self._lock:
            self._open += 1
        self._post(PooledConnection(sock, address), True)

    def _post(self, connection: PooledConnection, new: bool) -> None:
        self._inbox.append((connection, new))
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._wake_w.send(b"\0")

    def _work(self, connection: PooledConnection) -> None:
        """A connection's thread: serve what it sends, then park it or close it."""
        try:
            keep = self._serve(connection)
        except Exception:  # a fault ends this connection, never the server
            logger.exception("serving a connection failed")
            keep = False
        with self._lock:
            self._active -= 1
            if not isinstance(keep, bool):
                self._parked += 1
        if not isinstance(keep, bool):  # its thread ends here; its call-back resumes it
            keep.watch(lambda: self._resume(connection))
            return
        if keep and not self._stopping.is_set():
            self._post(connection, False)
        else:
            self._drop(connection)

    def _resume(self, connection: PooledConnection) -> None:
        """A parked connection's call-back: a thread serves it on (it must not block)."""
        with self._lock:
            self._parked -= 1
            self._active += 1
        try:
            self._serve_on(connection)
        except RuntimeError:  # no thread to be had: the connection ends, not held forever
            logger.exception("no thread to serve a parked long poll on; its connection closes")
            with self._lock:
                self._active -= 1
            self._drop(connection)

    def _drop(self, connection: PooledConnection) -> None:
        try:
            self._close(connection)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= 1

    # -- the selector thread --------------------------------------------------------------
    def _loop(self) -> None:
        try:
            while not self._stopping.is_set():
                self._take_inbox()
                timeout = self._expire(time.monotonic())
                for key, _ in self._selector.select(timeout):
                    if key.data is None:
                        self._drain_wakeups()
                    else:
                        self._dispatch(key.data)
        finally:
            self._shut()

    def _take_inbox(self) -> None:
        while self._inbox:
            connection, new = self._inbox.popleft()
            if new and not self._make_room():
                self._refuse_new(connection)
                continue
            connection.idle_until = time.monotonic() + self.idle_timeout_s
            try:
                self._selector.register(connection.sock, selectors.EVENT_READ, connection)
            except (ValueError, OSError):  # closed meanwhile
                self._drop(connection)
                continue
            self._idle[id(connection)] = connection

    def _make_room(self) -> bool:
        """Room for one more connection: closes the longest idle one if need be; False
        when every connection is at work."""
        with self._lock:
            over = self._open > self.max_open
        if not over:
            return True
        if not self._idle:
            return False
        _, oldest = self._idle.popitem(last=False)
        self._unregister(oldest)
        self.evicted += 1
        self._drop(oldest)
        return True

    def _refuse_new(self, connection: PooledConnection) -> None:
        self.refused += 1
        with contextlib.suppress(OSError):
            self._refuse(connection.sock)
        with self._lock:
            self._open -= 1

    def _dispatch(self, connection: PooledConnection) -> None:
        self._idle.pop(id(connection), None)
        self._unregister(connection)
        with self._lock:
            self._active += 1
        self._serve_on(connection)

    # -- the threads that serve -----------------------------------------------------------
    def _serve_on(self, connection: PooledConnection) -> None:
        """Serve the connection on a thread: one waiting for work, else a new one."""
        with self._handoff:
            if self._idle_workers > len(self._ready):  # one of them will take it
                self._ready.append(connection)
                self._handoff.notify()
                return
        threading.Thread(target=self._worker, args=(connection,), name="dmq-http-conn",
                         daemon=True).start()

    def _worker(self, connection: PooledConnection | None) -> None:
        while connection is not None:
            self._work(connection)
            connection = self._next_ready()

    def _next_ready(self) -> PooledConnection | None:
        """The next connection to serve, waited for up to WORKER_IDLE_S (None: none came,
        enough threads wait already, or the pool stops: the thread ends)."""
        deadline = time.monotonic() + WORKER_IDLE_S
        with self._handoff:
            if self._idle_workers >= WORKER_IDLE_MAX and not self._ready:
                return None
            self._idle_workers += 1
            try:
                while not self._ready:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._stopping.is_set():
                        return None
                    self._handoff.wait(left)
                return self._ready.popleft()
            finally:
                self._idle_workers -= 1

    def _expire(self, now: float) -> float | None:
        """Close connections idle too long; how long until the next one is due."""
        while self._idle:
            oldest = next(iter(self._idle.values()))
            if oldest.idle_until > now:
                return oldest.idle_until - now
            self._idle.popitem(last=False)
            self._unregister(oldest)
            self._drop(oldest)
        return None

    def _unregister(self, connection: PooledConnection) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(connection.sock)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            while self._wake_r.recv(4096):
                pass

    def _shut(self) -> None:
        for connection in list(self._idle.values()):
            self._unregister(connection)
            self._drop(connection)
        self._idle.clear()
        while self._inbox:
            connection, _new = self._inbox.popleft()
            self._drop(connection)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
