"""Backlog: the latency and cost of one receive as the number of visible messages grows."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.counting import Counter, DynamoSnapshot
from bench.sqs import BATCH, entries, preload, sqs_client
from bench.timing import Latency, Recorder

RECEIVE = "ReceiveMessage"
VISIBILITY_TIMEOUT = 3600


@dataclass(frozen=True)
class BacklogConfig:
    """The backlogs to measure and how many receives to make at each."""

    backlogs: tuple[int, ...]
    receives: int
    body_bytes: int = 256
    # Waits until the server is quiet after a preload (its stream pump has archived the
    # preload); returns the seconds waited. The receives measure the backlog, not that.
    settle: Callable[[], float] = field(default=lambda: 0.0)


@dataclass(frozen=True)
class BacklogResult:
    """What the receives at one backlog measured."""

    backlog: int
    preloaded: int
    preload_seconds: float
    settle_seconds: float
    receives: int
    returned: int
    returned_per_receive: float
    latency: Latency
    items_read: int
    items_read_per_receive: float
    items_read_per_returned: float | None
    dynamodb_requests_per_receive: float
    dynamodb_calls: dict[str, int]
    store_ms_per_receive: float
    query_ms_per_receive: float


def _receive_costs(
    sqs: Any, url: str, counter: Counter, config: BacklogConfig, refill: bool,
) -> tuple[Recorder, DynamoSnapshot, int]:
    """Make the receives; return their latencies, their DynamoDB share and messages returned.

    Each receive's DynamoDB share is the counter's change across that one call (nothing
    else uses the messages client meanwhile). When `refill` is set, as many messages as
    a receive took are sent again after it, so that the visible backlog stays constant.
    """
    recorder = Recorder()
    spent = DynamoSnapshot()
    returned = 0
    for number in range(config.receives):
        before = counter.snapshot()
        started = time.perf_counter()
        result = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=BATCH,
                                     VisibilityTimeout=VISIBILITY_TIMEOUT, WaitTimeSeconds=0)
        recorder.add(RECEIVE, time.perf_counter() - started)
        spent = spent + (counter.snapshot() - before)
        got = len(result.get("Messages", []))
        returned += got
        if refill and got:
            first = 1_000_000_000 + number * BATCH
            sqs.send_message_batch(QueueUrl=url, Entries=entries(first, got, config.body_bytes))
    return recorder, spent, returned


def measure_backlog(
    endpoint: str, counter: Counter, config: BacklogConfig, backlog: int
) -> BacklogResult:
    """Preload a fresh queue with `backlog` messages, then time the receives."""
    sqs = sqs_client(endpoint)
    url = sqs.create_queue(QueueName=f"dmq-bench-backlog-{backlog}")["QueueUrl"]
    started = time.perf_counter()
    preloaded = preload(endpoint, url, backlog, config.body_bytes) if backlog else 0
    preload_seconds = time.perf_counter() - started
    settle_seconds = config.settle()
    recorder, spent, returned = _receive_costs(sqs, url, counter, config, refill=backlog > 0)
    sqs.delete_queue(QueueUrl=url)
    receives = max(config.receives, 1)
    return BacklogResult(
        backlog=backlog, preloaded=preloaded, preload_seconds=round(preload_seconds, 2),
        settle_seconds=settle_seconds,
        receives=config.receives, returned=returned,
        returned_per_receive=round(returned / receives, 2),
        latency=recorder.summary(RECEIVE),
        items_read=spent.items_scanned,
        items_read_per_receive=round(spent.items_scanned / receives, 2),
        items_read_per_returned=(round(spent.items_scanned / returned, 3) if returned else None),
        dynamodb_requests_per_receive=round(spent.total_calls / receives, 2),
        dynamodb_calls=dict(spent.calls),
        store_ms_per_receive=round(sum(spent.seconds.values()) * 1000 / receives, 2),
        query_ms_per_receive=round(spent.seconds.get("Query", 0.0) * 1000 / receives, 2),
    )


def run_backlogs(endpoint: str, counter: Counter,
                 config: BacklogConfig) -> list[BacklogResult]:
    """One fresh queue per backlog, removed again afterwards."""
    return [measure_backlog(endpoint, counter, config, backlog) for backlog in config.backlogs]
