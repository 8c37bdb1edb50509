"""GIVEN the real local server on its default store (DynamoDB Local), healthy WHEN 300
consumers long-poll 300 queues at once, and a message then comes to each queue THEN every
consumer gets its message and none is answered a 5xx: the cluster's bulkhead refuses no
call of a healthy store under load (it is as wide as the store client's pool, which holds a
connection for every request the server serves at once), and the server never logs
urllib3's "Connection pool is full" (no store connection is opened only to be thrown away).

Every consumer's first receive reaches the store at about the same moment: before the
bulkhead followed the server's concurrency, its 32 slots were taken by the first of them
and the rest were refused with ServiceUnavailable ("Cluster default is unavailable").
The client makes one attempt per call, so a refusal cannot hide behind a retry.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.e2e.conftest import DmqProcess

WAITS = 300
WAIT_S = 10  # each consumer's WaitTimeSeconds: the sends come well within it
ACCOUNT = "313131313131"  # an account of its own (open mode), out of the other tests' quota
POOL_WARNING = "Connection pool is full"


def _client(url: str) -> Any:
    return boto3.session.Session().client(
        "sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id=ACCOUNT,
        aws_secret_access_key="any-secret",
        config=Config(connect_timeout=10, read_timeout=WAIT_S + 20,
                      retries={"mode": "standard", "total_max_attempts": 1},
                      max_pool_connections=WAITS + 20))


def test_300_waiting_consumers_get_no_5xx_from_a_healthy_store(
        dmq_server: DmqProcess) -> None:
    sqs = _client(dmq_server.url)
    stem = f"waits-{time.monotonic_ns() % 10**8}"
    with ThreadPoolExecutor(8) as pool:
        urls = list(pool.map(
            lambda i: sqs.create_queue(QueueName=f"{stem}-{i}")["QueueUrl"], range(WAITS)))
    answers: Counter[str] = Counter()
    lock = threading.Lock()
    go = threading.Barrier(WAITS + 1, timeout=60)

    def consume(url: str) -> None:
        go.wait()
        try:
            got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=WAIT_S)
            outcome = "message" if got.get("Messages") else "empty"
        except ClientError as exc:
            outcome = (f"{exc.response['ResponseMetadata'].get('HTTPStatusCode')} "
                       f"{exc.response['Error'].get('Message')}")
        except BotoCoreError as exc:
            outcome = f"no answer: {exc}"
        with lock:
            answers[outcome] += 1

    consumers = [threading.Thread(target=consume, args=(url,), daemon=True) for url in urls]
    try:
        for consumer in consumers:
            consumer.start()
        go.wait()
        time.sleep(2)  # every consumer is waiting (or was refused) by now
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda url: sqs.send_message(QueueUrl=url, MessageBody="x"), urls))
        deadline = time.monotonic() + WAIT_S + 30
        for consumer in consumers:
            consumer.join(timeout=max(0.1, deadline - time.monotonic()))
        assert not any(c.is_alive() for c in consumers), "a consumer got no answer in time"
        assert answers == {"message": WAITS}, dict(answers)
        assert POOL_WARNING not in dmq_server.output
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda url: sqs.delete_queue(QueueUrl=url), urls))
        _leave_settled(sqs, stem)


def _leave_settled(sqs: Any, stem: str, timeout_s: float = 60.0) -> None:
    """Return once the shared server's stream pump has taken in this burst (its sends,
    claims and the deletes' purges): a count read waits for at most a second of the
    pump, so the next test's counts would otherwise show the burst's backlog."""
    url = sqs.create_queue(QueueName=f"{stem}-settled")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="probe")
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            found = sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            if found["ApproximateNumberOfMessages"] == "1":
                return
            time.sleep(0.5)
        raise AssertionError(f"the counts did not take in the burst within {timeout_s} s")
    finally:
        sqs.delete_queue(QueueUrl=url)
