"""A long poll the local server parks waits without a thread: its wake-up calls back once
(at the change, or at its timeout), the poll is served again where it stopped, its place
among its account's long polls is kept while it is parked, and its queue's rate is not
charged a second time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from chalicelib.backend.wakeups import Wakeups
from chalicelib.domain import fair_share
from chalicelib.domain.fair_share import ConcurrencyShare
from chalicelib.frontend.throttling import check_rate
from chalicelib.service import parking
from chalicelib.service.messages import Received, SendRequest
from dmqlocal import connection_pool
from dmqlocal.connection_pool import ConnectionPool, PooledConnection
from tests.unit.memory_store import MemoryStore
from tests.unit.test_long_poll_wakeups import queue, service_over


class Calls:
    """A callback that counts its calls (from any thread)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.called = threading.Event()

    def __call__(self) -> None:
        self.times.append(time.monotonic())
        self.called.set()


# -- the wake-ups, without a thread ---------------------------------------------------------

def test_a_watch_is_called_back_once_by_a_change_of_its_queue_only() -> None:
    wakeups = Wakeups()
    on_a, on_b = Calls(), Calls()
    wakeups.watch("a", wakeups.generation("a"), 5.0, on_a)
    wakeups.watch("b", wakeups.generation("b"), 5.0, on_b)
    assert wakeups.waiting() == 2
    wakeups.notify("a")
    wakeups.notify("a")
    assert len(on_a.times) == 1 and not on_b.times
    assert wakeups.waiting() == 1


def test_a_change_before_the_watch_calls_back_at_once() -> None:
    wakeups = Wakeups()
    seen = wakeups.generation("q")
    wakeups.notify("q")
    calls = Calls()
    wakeups.watch("q", seen, 5.0, calls)
    assert len(calls.times) == 1
    assert wakeups.waiting() == 0


def test_a_watch_times_out_once_from_the_timer() -> None:
    wakeups = Wakeups()
    calls = Calls()
    started = time.monotonic()
    wakeups.watch("q", wakeups.generation("q"), 0.2, calls)
    assert calls.called.wait(5)
    assert 0.15 <= calls.times[0] - started < 2.0
    wakeups.notify("q")  # too late: nothing more
    time.sleep(0.1)
    assert len(calls.times) == 1
    assert wakeups.waiting() == 0


def test_a_send_of_one_message_wakes_the_longest_watching_poll_first() -> None:
    wakeups = Wakeups()
    first, second = Calls(), Calls()
    wakeups.watch("q", wakeups.generation("q"), 5.0, first)
    wakeups.watch("q", wakeups.generation("q"), 5.0, second)
    wakeups.notify("q", 1)
    assert (len(first.times), len(second.times)) == (1, 0)
    wakeups.notify("q", 5)
    assert len(second.times) == 1
    assert wakeups.waiting() == 0


# -- a receive that parks ---------------------------------------------------------------------

def _parked_receive(service: Any, q: Any, wait: int = 5) -> Any:
    """A receive's serving, as the server runs it: parkable, as a generator."""
    def serve() -> list[Received]:
        return service.receive(q, 1, None, wait)
    with parking.parkable_here():
        serving = parking.serving(serve)
        return serving, next(serving)


def test_a_parked_receive_is_served_again_on_the_send_and_gets_the_message() -> None:
    # GIVEN a long poll that found nothing, parked: its serving is suspended, not a thread
    service, q = service_over(MemoryStore(), following=lambda: True), queue("parked")
    share = ConcurrencyShare(limit=0, max_waits=2)
    with fair_share.holding(share, "a"):
        serving, continuation = _parked_receive(service, q)
        assert isinstance(continuation, parking.Continuation)
        # its place among the account's long polls is kept while it is parked
        assert share.polls("a") == 1
        woken = Calls()
        continuation.watch(woken)
        # WHEN a message is sent THEN the wake-up calls back, and the poll gets it
        service.send(q, SendRequest("0", "hello"))
        assert woken.called.wait(5)
        with pytest.raises(StopIteration) as answered:
            serving.send(None)
        received = answered.value.value
        assert [r.message.body for r in received] == ["hello"]
        assert share.polls("a") == 0


def test_a_parked_receive_served_again_keeps_its_deadline() -> None:
    service, q = service_over(MemoryStore(), following=lambda: True), queue("deadline")
    serving, continuation = _parked_receive(service, q, wait=1)
    deadline = continuation.deadline_ms
    assert 0.5 <= continuation.pause_s <= 1.0
    time.sleep(continuation.pause_s + 0.05)
    with pytest.raises(StopIteration) as answered:
        serving.send(None)  # past its deadline: answered empty, not parked again
    assert answered.value.value == []
    assert continuation.deadline_ms == deadline


def test_a_parked_receive_closed_gives_its_place_back() -> None:
    service, q = service_over(MemoryStore(), following=lambda: True), queue("closed")
    share = ConcurrencyShare(limit=0, max_waits=1)
    with fair_share.holding(share, "a"):
        serving, _ = _parked_receive(service, q)
        # a second long poll of the account is past its share while the first is parked
        with pytest.raises(fair_share.WaitShareExceeded):
            service.receive(q, 1, None, 5)
        serving.close()  # the server stops, or the peer is gone
        assert share.polls("a") == 0


def test_a_receive_that_cannot_park_sleeps_in_its_thread_as_before() -> None:
    service, q = service_over(MemoryStore(), following=lambda: True), queue("thread")
    started = time.monotonic()
    assert service.receive(q, 1, None, 1) == []
    assert time.monotonic() - started >= 0.9


# -- the rate, charged once --------------------------------------------------------------------

def test_a_parked_poll_served_again_is_not_charged_to_its_queues_rate_twice() -> None:
    admitted: list[Any] = []
    limit = SimpleNamespace(enabled=True)
    throttle = SimpleNamespace(enabled=True, queue_limit=limit,
                               admit=lambda account, q: admitted.append((account, q)))
    services: Any = SimpleNamespace(throttle=throttle,
                                    queues=SimpleNamespace(find=lambda queue_id: object()))
    context: Any = SimpleNamespace(account="111122223333",
                                   queue_parts_or_none=lambda: ("111122223333", "q"))
    check_rate(services, context, SimpleNamespace())
    assert len(admitted) == 1
    continuation = parking.Continuation(0, 0.0)
    with parking.resuming(continuation):
        assert parking.resumed()
        check_rate(services, context, SimpleNamespace())  # the same request, again
        assert parking.take() is continuation
        assert not parking.resumed()
    assert len(admitted) == 1


# -- the connection pool ------------------------------------------------------------------------

def _parks_first(served: list[Any], note: Callable[[], Any],
                 ) -> tuple[Callable[[PooledConnection], Any], list[Any]]:
    """A pool's serve function that parks the first connection it serves (its wake-up
    call-back goes to the list returned) and ends every later one; each call appends
    `note()` to `served`."""
    callbacks: list[Any] = []

    class Parked:
        def watch(self, callback: Any) -> None:
            callbacks.append(callback)

    def serve(connection: PooledConnection) -> Any:
        served.append(note())
        return Parked() if len(served) == 1 else False

    return serve, callbacks


def test_a_parked_connection_is_served_on_by_a_new_thread_or_closed_when_none_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served: list[int] = []
    closed: list[Any] = []
    serve, callbacks = _parks_first(served, lambda: 1)
    monkeypatch.setattr(connection_pool, "WORKER_IDLE_S", 0.0)  # no thread waits for work
    pool = ConnectionPool(serve, closed.append, lambda sock: None, 10, 60.0)
    pool.start()
    pairs = [socket.socketpair() for _ in range(2)]
    try:
        for server_side, client_side in pairs:
            pool.offer(server_side, ("127.0.0.1", 0))
            client_side.send(b"x")
        deadline = time.monotonic() + 5
        while (len(callbacks) < 1 or len(served) < 2) and time.monotonic() < deadline:
            time.sleep(0.01)
        # GIVEN one connection parked (held without a thread) and one served and closed
        assert pool.parked() == 1 and len(closed) == 1
        # WHEN no thread waits for work and none can be started for its call-back THEN it
        # is closed, not held
        monkeypatch.setattr(threading.Thread, "start", _no_thread)
        callbacks[0]()
        assert pool.parked() == 0 and len(closed) == 2
        assert pool.counts()[2] == 0  # nothing at work
    finally:
        pool.stop()
        for server_side, client_side in pairs:
            server_side.close()
            client_side.close()


def _no_thread(self: threading.Thread) -> None:
    raise RuntimeError("can't start new thread")


def test_a_woken_connection_is_served_by_a_thread_waiting_for_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a connection parked, and the thread that served it waiting for more work
    monkeypatch.setattr(connection_pool, "WORKER_IDLE_S", 30.0)
    served: list[str] = []
    serve, callbacks = _parks_first(served, lambda: threading.current_thread().name)
    pool = ConnectionPool(serve, lambda c: None, lambda sock: None, 10, 60.0)
    pool.start()
    server_side, client_side = socket.socketpair()
    try:
        pool.offer(server_side, ("127.0.0.1", 0))
        client_side.send(b"x")
        deadline = time.monotonic() + 5
        while not callbacks and time.monotonic() < deadline:
            time.sleep(0.01)
        started = threading.Thread.start
        starts: list[int] = []

        def counted(self: threading.Thread) -> None:
            starts.append(1)
            started(self)

        # WHEN it is woken THEN it is served on without a thread started for it
        threading.Thread.start = counted  # type: ignore[method-assign]
        try:
            callbacks[0]()
            while len(served) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            threading.Thread.start = started  # type: ignore[method-assign]
        assert len(served) == 2 and starts == []
    finally:
        pool.stop()
        server_side.close()
        client_side.close()
