"""GIVEN the local server and a queue holding a few thousand messages
WHEN PurgeQueue (or DeleteQueue) is called over HTTP
THEN it answers within a second, no message sent before it is received or counted from
then on, messages sent after it are, and the server's timers remove the stored messages
within seconds."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

BACKLOG = 3_000
GONE_WITHIN_S = 30.0
COUNTS = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
          "ApproximateNumberOfMessagesDelayed"]


def _load(make_sqs: Callable[..., Any], url: str, count: int) -> None:
    def batch(start: int) -> None:
        client = clients[start // 10 % len(clients)]
        client.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"old-{start + i}"} for i in range(10)])

    clients = [make_sqs() for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(batch, range(0, count, 10)))


def _total(sqs: Any, url: str) -> int:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
    return sum(int(found[n]) for n in COUNTS)


def _wait_for_total(sqs: Any, url: str, total: int) -> float:
    """Seconds until the queue counts `total` messages (bounded by GONE_WITHIN_S)."""
    start = time.monotonic()
    while time.monotonic() - start < GONE_WITHIN_S:
        if _total(sqs, url) == total:
            return time.monotonic() - start
        time.sleep(0.25)
    return float("inf")


def test_a_purge_of_thousands_answers_at_once_and_empties_the_queue(
        make_sqs: Callable[..., Any], sqs: Any, unique_name: Callable[[str], str],
        dmq_server: Any) -> None:
    # GIVEN a queue of 3,000 messages, 10 of them in flight
    url = sqs.create_queue(QueueName=unique_name("purged"))["QueueUrl"]
    _load(make_sqs, url, BACKLOG)
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                   VisibilityTimeout=2)["Messages"]) == 10
    assert _wait_for_total(sqs, url, BACKLOG) < GONE_WITHIN_S
    done = re.compile(r"purge \S+ done: \d+ messages removed")
    logged_before = len(done.findall(dmq_server.output))
    # WHEN it is purged
    start = time.monotonic()
    sqs.purge_queue(QueueUrl=url)
    took = time.monotonic() - start
    # THEN the answer came within a second
    assert took < 1.0, took
    # AND a message sent after it is the only one received, even once the in-flight
    # ones' timeout has passed
    time.sleep(0.01)
    sqs.send_message(QueueUrl=url, MessageBody="after")
    # AND the counts show only that one at once, whatever the removal has done yet
    assert _total(sqs, url) == 1
    time.sleep(2.1)
    bodies = []
    for _ in range(5):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
        bodies += [m["Body"] for m in got.get("Messages", [])]
    assert bodies == ["after"]
    # AND once the server's timers have removed the stored messages, it is counted alone
    # (while they run, the in-flight count may miss it: the receives dropped the purged
    # messages that had been in flight, which the purge's counts still take off)
    assert _wait_for_total(sqs, url, 1) < GONE_WITHIN_S
    # AND the server's log says the removal is done (DMQ's own loggers log at INFO, not
    # at the ERROR Chalice gives the app's logger)
    deadline = time.monotonic() + GONE_WITHIN_S
    while len(done.findall(dmq_server.output)) == logged_before \
            and time.monotonic() < deadline:
        time.sleep(0.25)
    assert len(done.findall(dmq_server.output)) > logged_before, dmq_server.output[-2000:]


def test_a_delete_of_thousands_answers_at_once(
        make_sqs: Callable[..., Any], sqs: Any, unique_name: Callable[[str], str]) -> None:
    # GIVEN a queue of 3,000 messages
    name = unique_name("deleted")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    _load(make_sqs, url, BACKLOG)
    # WHEN it is deleted THEN the answer comes within a second
    start = time.monotonic()
    sqs.delete_queue(QueueUrl=url)
    assert time.monotonic() - start < 1.0
    # AND the name stays taken for 60 s, as in SQS
    with pytest.raises(sqs.exceptions.QueueDeletedRecently):
        sqs.create_queue(QueueName=name)
