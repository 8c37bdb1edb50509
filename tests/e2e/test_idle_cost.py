"""GIVEN the real local server on DynamoDB Local, every store request it makes counted at a
proxy in front of the store WHEN a few queues were created and messages sent and deleted,
and the server has been quiet since THEN it makes at most 2 store requests per second,
and a message sent after the idle spell reaches the stream pump within 2 s; count reads
with nothing written make no store request for the counts they read before."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.idle_cost import TARGET_PER_S, IdleServer, measure
from bench.sqs import sqs_client

pytestmark = pytest.mark.e2e

WINDOW_S = 10.0
IDLE_S = 20.0
WAKE_LIMIT_S = 2.0


@pytest.fixture(scope="module")
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


PUMP_INTERVAL_S = 0.2  # the pump's pace while requests wake it (dmqlocal/pump.py)
COUNT_READS = 40


def _visible(sqs: Any, url: str) -> int:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(found["Attributes"]["ApproximateNumberOfMessages"])


def test_count_reads_wait_for_the_stream_only_after_this_server_wrote(
    idle_server: IdleServer,
) -> None:
    assert idle_server.dmq is not None and idle_server.proxy is not None
    sqs = sqs_client(idle_server.dmq.url)
    url = sqs.create_queue(QueueName="dmq-idle-counted")["QueueUrl"]
    # GIVEN a message just sent: the count read right after it waits for the pump and
    # counts it
    sqs.send_message(QueueUrl=url, MessageBody="counted")
    assert _visible(sqs, url) == 1
    time.sleep(1.5)  # the pump's next pass finds nothing new
    # WHEN the counts are read again and again with nothing written
    start = time.monotonic()
    for _ in range(COUNT_READS):
        assert _visible(sqs, url) == 1
    end = time.monotonic()
    # THEN the stream is read at the pump's own pace, not once per count read
    spent = idle_server.proxy.by_operation(start, end)
    reads = spent.get("GetRecords", 0)
    assert reads <= min(COUNT_READS - 1, (end - start) / PUMP_INTERVAL_S + 2), reads
    # AND the count item, read once since its last change, is not read again: the pump
    # follows every change of it (chalicelib/backend/count_cache.py)
    assert spent.get("BatchGetItem", 0) <= 1, spent
    # AND a count read after a new write waits for it again
    sqs.send_message(QueueUrl=url, MessageBody="counted too")
    assert _visible(sqs, url) == 2
