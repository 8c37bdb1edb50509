"""GIVEN the real local server on DynamoDB Local, every store request it makes counted at a
proxy in front of the store WHEN a few queues were created and messages sent and deleted,
and the server has been quiet since THEN it makes at most 2 store requests per second,
and a message sent after the idle spell reaches the stream pump within 2 s."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.idle_cost import TARGET_PER_S, IdleServer, measure

pytestmark = pytest.mark.e2e

WINDOW_S = 10.0
IDLE_S = 20.0
WAKE_LIMIT_S = 2.0


@pytest.fixture
def idle_server() -> Iterator[IdleServer]:
    server = IdleServer()
    try:
        yield server.start()
    finally:
        server.stop()


def test_an_idle_server_makes_at_most_two_store_requests_a_second(
    idle_server: IdleServer,
) -> None:
    cost = measure(idle_server, WINDOW_S, IDLE_S)
    assert cost.per_second <= TARGET_PER_S, cost
    # The pump still reads its streams while idle (it does not stop polling) ...
    assert cost.by_operation.get("GetRecords", 0) >= 1, cost
    # ... and a write after the idle spell reaches it promptly.
    assert cost.wake_s is not None and cost.wake_s < WAKE_LIMIT_S, cost
