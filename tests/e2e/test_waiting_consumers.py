"""GIVEN the real local server on DynamoDB Local, every store request it makes counted at a
proxy in front of the store, and 200 consumers long-polling at once (150 on queues of
their own, 50 more on one shared queue) WHEN they have all waited a while, then one
message is sent for each THEN every message sent during the wait is delivered in that
wait (no missed wake-up), no answer is a 500 or above, and the waiting consumers cost
the store nothing: it sees at most 2 requests a second, the stream pump's own reads; nor
does a waiting consumer hold a server thread (its long poll is parked). The same holds
on FIFO queues."""

from __future__ import annotations

import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.idle_cost import IdleServer
from bench.sqs import KEY, SECRET, sqs_client
from bench.waiting import IDLE_TARGET_PER_S, Waits, measure, thread_count
from tests.admin_signing import sign

pytestmark = [pytest.mark.e2e, pytest.mark.quiet]  # it measures idle store requests and latencies


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


def _query_poll(endpoint: str, path: str) -> str | None:
    """A Query-protocol ReceiveMessage of up to 10 s at a queue's URL path: the body got."""
    body = b"Action=ReceiveMessage&Version=2012-11-05&WaitTimeSeconds=10"
    signed = sign("POST", endpoint + path, body,
                  {"Content-Type": "application/x-www-form-urlencoded"},
                  key=KEY, secret=SECRET, service="sqs")
    sent = urllib.request.Request(signed.url, data=body, method="POST", headers=signed.headers)
    with urllib.request.urlopen(sent, timeout=30) as response:
        answer = ET.fromstring(response.read())
    return next((e.text for e in answer.iter() if e.tag.endswith("}Body")), None)


def test_query_polls_at_localstack_style_urls_are_parked_too(server: IdleServer) -> None:
    # GIVEN 20 Query-protocol consumers long-polling queues at `/queue/<region>/...` URLs
    assert server.dmq is not None
    endpoint, pid = server.dmq.url, server.dmq.process.pid
    sqs = sqs_client(endpoint, 4)
    urls = [sqs.create_queue(QueueName=f"e2e-ls-style-{n}")["QueueUrl"] for n in range(20)]
    paths = ["/queue/us-east-1/" + "/".join(url.rsplit("/", 2)[1:]) for url in urls]
    threads_before = thread_count(pid)
    with ThreadPoolExecutor(len(paths)) as pool:
        polls = [pool.submit(_query_poll, endpoint, path) for path in paths]
        time.sleep(2.0)
        # THEN while they wait the server holds no thread for them
        waiting = thread_count(pid)
        assert threads_before is not None and waiting is not None
        assert waiting - threads_before < 5, (threads_before, waiting)
        # AND each gets the message sent to its queue
        for n, url in enumerate(urls):
            sqs.send_message(QueueUrl=url, MessageBody=f"ls-{n}")
        assert [poll.result(timeout=30) for poll in polls] == [f"ls-{n}" for n in range(20)]
