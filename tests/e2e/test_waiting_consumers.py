"""GIVEN the real local server on DynamoDB Local, every store request it makes counted at a
proxy in front of the store, and 200 consumers long-polling at once (150 on queues of
their own, 50 more on one shared queue) WHEN they have all waited a while, then one
message is sent for each THEN every message sent during the wait is delivered in that
wait (no missed wake-up), no answer is a 500 or above, and the waiting consumers cost
the store nothing: it sees at most 2 requests a second, the stream pump's own reads; nor
does a waiting consumer hold a server thread (its long poll is parked). The same holds
on FIFO queues."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.idle_cost import IdleServer
from bench.waiting import IDLE_TARGET_PER_S, Waits, measure

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server() -> Iterator[IdleServer]:
    idle = IdleServer()
    try:
        yield idle.start()
    finally:
        idle.stop()


def _each_got_its_message_at_no_cost(waits: Waits, consumers: int) -> None:
    assert waits.consumers == consumers
    assert waits.server_errors == 0, waits.errors
    assert waits.missed == 0, waits
    assert waits.delivered == consumers, waits
    assert waits.idle_per_s <= IDLE_TARGET_PER_S, waits.idle_by_operation
    # No receive reads the index while everyone waits (the rest is the pump and timers)
    assert "Query" not in waits.idle_by_operation, waits.idle_by_operation
    # The polls are parked, not asleep in threads of their own: a thread each was 200
    assert waits.thread_growth is not None and waits.thread_growth < 20, waits.thread_growth


def test_two_hundred_waiting_consumers_each_get_their_message_in_the_same_wait(
    server: IdleServer,
) -> None:
    _each_got_its_message_at_no_cost(
        measure(server, queues=150, shared=50, send_rate=50.0, prefix="e2e-wait"), 200)


def test_waiting_fifo_consumers_cost_the_store_nothing_and_each_gets_its_message(
    server: IdleServer,
) -> None:
    _each_got_its_message_at_no_cost(
        measure(server, queues=40, shared=20, send_rate=50.0, prefix="e2e-wait-fifo",
                fifo=True), 60)
