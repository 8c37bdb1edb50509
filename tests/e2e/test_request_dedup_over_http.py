"""GIVEN the real local server (DynamoDB Local) behind a proxy that swallows the answers of
the first connections WHEN boto3 sends with a short read timeout, times out after DMQ stored
the message, and retries with the same amz-sdk-invocation-id THEN the retry gets the first
response and the queue holds the message once (SendMessage and SendMessageBatch).

AND, counted at DMQ's own DynamoDB client (DMQ_COUNT_DYNAMODB=1, as the benchmark counts),
a SendMessage is one request to the messages table, the conditional PutItem of its
message, and a SendMessageBatch of ten is one TransactWriteItems. (The server's background
loops use that client too, for the control table: the stream consumer's count updates
and the heartbeats. That a send makes no request besides its write is counted in process,
without them, in tests/functional/test_request_dedup.py.)"""

from __future__ import annotations

import select
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bench.counting import RemoteCounter
from bench.sqs import entries
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, ClientFactory, launch

PUMP_LIMIT_S = 15.0  # a proxied connection lives at most this long
READ_TIMEOUT_S = 3
PINNED = "6f1c2a9e-0000-4000-8000-0000000000e2"
MESSAGES_TABLE = "dmq-messages"
CONTROL_TABLE = "dmq-control"


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Pump)
        self.upstream = upstream
        self.swallow = 0  # how many more connections get no answer
        self.lock = threading.Lock()

    def take_swallow(self) -> bool:
        with self.lock:
            if self.swallow > 0:
                self.swallow -= 1
                return True
            return False


class _Pump(socketserver.BaseRequestHandler):
    """Forwards one client connection to DMQ; a swallowed one never hears back."""

    server: _Proxy

    def handle(self) -> None:
        swallow = self.server.take_swallow()
        with socket.create_connection(self.server.upstream, timeout=5) as upstream:
            peers = {self.request: upstream, upstream: self.request}
            deadline = time.monotonic() + PUMP_LIMIT_S
            while (left := deadline - time.monotonic()) > 0:
                readable, _, _ = select.select(list(peers), [], [], min(left, 0.5))
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is upstream and swallow:
                        continue  # DMQ answered; the client never gets it
                    peers[sock].sendall(data)


@pytest.fixture(scope="module")
def proxy(dmq_server: Any) -> Iterator[_Proxy]:
    server = _Proxy(("127.0.0.1", dmq_server.port))
    thread = threading.Thread(target=server.serve_forever, name="dedup-proxy", daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def retrying(proxy: _Proxy) -> tuple[Any, list[str]]:
    """boto3 through the proxy: 1 s read timeout, standard retries; and the invocation
    ids of its attempts."""
    host, port = proxy.server_address[:2]
    sqs = boto3.client(
        "sqs", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
        aws_access_key_id="any-key", aws_secret_access_key="any-secret",
        config=Config(connect_timeout=5, read_timeout=READ_TIMEOUT_S,
                      retries={"mode": "standard", "max_attempts": 4}))
    ids: list[str] = []

    def note(request: Any, **kwargs: Any) -> None:
        # One connection per attempt, so that the proxy swallows whole attempts.
        request.headers["Connection"] = "close"
        value = request.headers.get("amz-sdk-invocation-id", "")
        ids.append(value.decode() if isinstance(value, bytes) else str(value))

    sqs.meta.events.register("before-send.sqs", note)
    return sqs, ids


def _all(sqs: Any, url: str, expected: int) -> list[dict[str, Any]]:
    """Receive (without deleting) until `expected` messages, or a bounded number of polls,
    then once more to see that nothing else is there."""
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60,
                                  WaitTimeSeconds=1).get("Messages", [])
        seen.update((m["MessageId"], m) for m in got)
        if len(seen) >= expected and not got:
            break
    return list(seen.values())


def test_a_timed_out_send_is_retried_and_enqueued_once(
    retrying: tuple[Any, list[str]], proxy: _Proxy, unique_name: Callable[[str], str],
) -> None:
    sqs, ids = retrying
    url = sqs.create_queue(QueueName=unique_name("once"))["QueueUrl"]
    ids.clear()
    proxy.swallow = 1
    sent = sqs.send_message(QueueUrl=url, MessageBody="exactly once, please")
    # (a slow answer on a busy machine can add an attempt: still the same call)
    assert sent["ResponseMetadata"]["RetryAttempts"] >= 1
    assert len(ids) >= 2 and len(set(ids)) == 1 and ids[0] != ""
    got = _all(sqs, url, 1)
    assert [(m["MessageId"], m["Body"]) for m in got] == [
        (sent["MessageId"], "exactly once, please")]


def test_a_timed_out_batch_is_retried_and_enqueued_once(
    retrying: tuple[Any, list[str]], proxy: _Proxy, unique_name: Callable[[str], str],
) -> None:
    sqs, ids = retrying
    url = sqs.create_queue(QueueName=unique_name("batch"))["QueueUrl"]
    ids.clear()
    proxy.swallow = 2
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)])
    assert sent["ResponseMetadata"]["RetryAttempts"] >= 2
    assert len(ids) >= 3 and len(set(ids)) == 1
    assert len(sent["Successful"]) == 10
    got = _all(sqs, url, 10)
    assert sorted(m["MessageId"] for m in got) == sorted(
        s["MessageId"] for s in sent["Successful"])


def test_separate_calls_with_the_same_body_are_both_enqueued(
    retrying: tuple[Any, list[str]], unique_name: Callable[[str], str],
) -> None:
    sqs, _ = retrying
    url = sqs.create_queue(QueueName=unique_name("twice"))["QueueUrl"]
    first = sqs.send_message(QueueUrl=url, MessageBody="same")
    second = sqs.send_message(QueueUrl=url, MessageBody="same")
    assert first["MessageId"] != second["MessageId"]
    assert len(_all(sqs, url, 2)) == 2


def _pinned(make_sqs: ClientFactory, endpoint: str | None = None) -> Any:
    """A client whose every call carries the same invocation id, as retries of one call."""
    sqs = make_sqs(endpoint)

    def pin(request: Any, **kwargs: Any) -> None:
        request.headers["amz-sdk-invocation-id"] = PINNED

    sqs.meta.events.register("before-send.sqs", pin)
    return sqs


def test_a_batch_retry_meeting_some_entries_stored_sends_only_the_others(
    make_sqs: ClientFactory, unique_name: Callable[[str], str],
) -> None:
    # GIVEN a batch stored, 3 of whose messages were then received and deleted
    sqs = _pinned(make_sqs)
    url = sqs.create_queue(QueueName=unique_name("partial"))["QueueUrl"]
    batch = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    first = {s["Id"]: s["MessageId"] for s in sqs.send_message_batch(
        QueueUrl=url, Entries=batch)["Successful"]}
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3,
                              WaitTimeSeconds=1)["Messages"]
    for m in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    # WHEN the call comes again (the same invocation id and entries)
    again = sqs.send_message_batch(QueueUrl=url, Entries=batch)
    # THEN each entry has its first id; the 3 deleted ones are enqueued again (the window
    # that remains), the 7 stored ones are not doubled
    assert {s["Id"]: s["MessageId"] for s in again["Successful"]} == first
    held = _all(sqs, url, 10)
    assert sorted(m["MessageId"] for m in held) == sorted(first.values())


def test_a_send_is_one_store_request_and_a_batch_of_ten_is_one(
    make_sqs: ClientFactory, unique_name: Callable[[str], str],
) -> None:
    sends, batches = 20, 5
    dmq = launch(DMQ_COUNT_DYNAMODB="1")
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        sqs: Any = make_sqs(dmq.url)
        url = sqs.create_queue(QueueName=unique_name("counted"))["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="warm-up")
        counter = RemoteCounter(dmq.url)
        # WHEN SendMessage and SendMessageBatch(10) calls are served
        start = counter.snapshot()
        for n in range(sends):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        middle = counter.snapshot()
        for n in range(batches):
            sqs.send_message_batch(QueueUrl=url, Entries=entries(10 * n, 10, 32))
        end = counter.snapshot()
        # AND a retry of one call (the same invocation id), which finds its messages
        pinned = _pinned(make_sqs, dmq.url)
        pinned.send_message_batch(QueueUrl=url, Entries=entries(0, 10, 32))
        before_retry = counter.snapshot()
        retry = pinned.send_message_batch(QueueUrl=url, Entries=entries(0, 10, 32))
        after_retry = counter.snapshot()
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output
    # THEN each call made exactly one request to the messages table, the write of its
    # messages, and the only other requests were the background loops' on the control table
    single, batch = middle - start, end - middle
    retried = after_retry - before_retry
    print(f"[dedup] messages-table requests per SendMessage "
          f"{sum(single.tables[MESSAGES_TABLE].values()) / sends:.2f}, per "
          f"SendMessageBatch(10) {sum(batch.tables[MESSAGES_TABLE].values()) / batches:.2f}; "
          f"background control-table requests meanwhile {single.tables.get(CONTROL_TABLE)}, "
          f"{batch.tables.get(CONTROL_TABLE)}")
    assert single.tables[MESSAGES_TABLE] == {"PutItem": sends}
    assert batch.tables[MESSAGES_TABLE] == {"TransactWriteItems": batches}
    assert retried.tables[MESSAGES_TABLE] == {"TransactWriteItems": 1}
    for spent in (single, batch, retried):
        assert set(spent.tables) <= {MESSAGES_TABLE, CONTROL_TABLE}
    assert len(retry["Successful"]) == 10
