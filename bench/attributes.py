"""GetQueueAttributes(All) latency as the backlog grows: the approximate counts must not
cost more with more messages."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.sqs import preload, sqs_client
from bench.timing import Latency, Recorder

OPERATION = "GetQueueAttributes"


@dataclass(frozen=True)
class AttributesResult:
    """The calls at one backlog."""

    backlog: int
    preloaded: int
    preload_seconds: float
    preload_messages_per_s: float
    settle_seconds: float
    latency: Latency
    visible_reported: int


def measure_attributes(endpoint: str, backlog: int, calls: int, max_seconds: float,
                       body_bytes: int = 256,
                       settle: Callable[[], float] = lambda: 0.0) -> AttributesResult:
    """Preload a queue named after its backlog (it is kept, for the memory and restart
    figures), then call GetQueueAttributes(All) `calls` times or for `max_seconds`."""
    sqs = sqs_client(endpoint)
    url = sqs.create_queue(QueueName=f"dmq-bench-attributes-{backlog}")["QueueUrl"]
    started = time.perf_counter()
    preloaded = preload(endpoint, url, backlog, body_bytes, threads=8)
    preload_s = time.perf_counter() - started
    settled = settle()  # the server's stream pump archives the preload first
    recorder = Recorder()
    visible = 0
    deadline = time.monotonic() + max_seconds
    for _ in range(calls):
        if time.monotonic() > deadline:
            break
        with recorder.timed(OPERATION):
            reply = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        visible = int(reply["Attributes"].get("ApproximateNumberOfMessages", 0))
    return AttributesResult(backlog, preloaded, round(preload_s, 1),
                            round(preloaded / preload_s, 1) if preload_s > 0 else 0.0, settled,
                            recorder.summary(OPERATION), visible)
