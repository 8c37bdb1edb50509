"""FIFO queues on DMQ's default store: messages/s and DynamoDB requests per message.

Three runs over HTTP with boto3, each on a new FIFO queue of a DMQ server on a fresh data
folder: one message group; 10 groups; 100 groups in high-throughput mode
(FifoThroughputLimit=perMessageGroupId, DeduplicationScope=messageGroup, 4 shards).
Producers send batches of 10 (each producer owns its groups, so their order is known);
consumers receive up to 10, wait up to 1 s, and delete in batches. Each run checks that
every message arrived exactly once and in its group's order.

    python -m bench.fifo [--messages N] [--producers P] [--consumers C] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.counting import Counter, RemoteCounter
from bench.servers import start_dmq
from bench.sqs import BATCH, sqs_client

RUN_TIMEOUT_S = 180.0
CASES = (("1 group", 1, False), ("10 groups", 10, False),
         ("100 groups, high throughput", 100, True))


@dataclass(frozen=True)
class FifoConfig:
    """The size of each run."""

    messages: int
    producers: int
    consumers: int
    body_bytes: int = 256


@dataclass
class FifoResult:
    """One run's figures."""

    label: str
    groups: int
    high_throughput: bool
    messages: int
    delivered: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    seconds: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def messages_per_s(self) -> float:
        """Delivered (received and deleted) messages per second."""
        return round(self.delivered / self.seconds, 1) if self.seconds else 0.0

    @property
    def requests_per_message(self) -> float:
        """DynamoDB requests DMQ made per delivered message (send, receive, delete)."""
        return round(sum(self.calls.values()) / self.delivered, 2) if self.delivered else 0.0


def _attributes(high_throughput: bool) -> dict[str, str]:
    attributes = {"FifoQueue": "true", "VisibilityTimeout": "120"}
    if high_throughput:
        attributes.update(DeduplicationScope="messageGroup",
                          FifoThroughputLimit="perMessageGroupId")
    return attributes


def _produce(sqs: Any, url: str, producer: int, producers: int, groups: int, count: int,
             size: int) -> None:
    """Send this producer's share, 10 to a batch; producer p owns groups p, p+P, ..."""
    owned = [g for g in range(groups) if g % producers == producer] or [producer % groups]
    numbers = range(producer, count, producers)
    batch: list[dict[str, str]] = []
    for position, number in enumerate(numbers):
        group = owned[position % len(owned)]
        body = f"{producer}:{group}:{number:08d}:".ljust(size, "x")
        batch.append({"Id": str(len(batch)), "MessageBody": body,
                      "MessageGroupId": f"g{group}", "MessageDeduplicationId": str(number)})
        if len(batch) == BATCH:
            sqs.send_message_batch(QueueUrl=url, Entries=batch)
            batch = []
    if batch:
        sqs.send_message_batch(QueueUrl=url, Entries=batch)


class _Tally:
    """What the consumers received, shared under a lock."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: set[str] = set()
        self.last: dict[tuple[str, str], int] = {}
        self.duplicates = 0
        self.out_of_order = 0
        self.lock = threading.Lock()

    def add(self, bodies: list[str]) -> None:
        with self.lock:
            for body in bodies:
                producer, group, number, _ = body.split(":", 3)
                if body in self.seen:
                    self.duplicates += 1
                    continue
                self.seen.add(body)
                key = (producer, group)
                if int(number) < self.last.get(key, -1):
                    self.out_of_order += 1
                self.last[key] = int(number)

    @property
    def done(self) -> bool:
        with self.lock:
            return len(self.seen) >= self.expected


def _consume(sqs: Any, url: str, tally: _Tally, deadline: float) -> None:
    while not tally.done and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=BATCH,
                                       WaitTimeSeconds=1).get("Messages", [])
        if not messages:
            continue
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
        tally.add([m["Body"] for m in messages])


def run_case(endpoint: str, counter: Counter, label: str, groups: int, high_throughput: bool,
             config: FifoConfig) -> FifoResult:
    """Send `config.messages` over `groups` groups while consumers drain the queue."""
    sqs = sqs_client(endpoint, config.producers + config.consumers)
    name = f"dmq-bench-fifo-{groups}{'-ht' if high_throughput else ''}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes=_attributes(high_throughput))["QueueUrl"]
    tally = _Tally(config.messages)
    before = counter.snapshot()
    started = time.perf_counter()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    threads = [threading.Thread(target=_produce, args=(sqs, url, p, config.producers, groups,
                                                       config.messages, config.body_bytes))
               for p in range(config.producers)]
    threads += [threading.Thread(target=_consume, args=(sqs, url, tally, deadline))
                for _ in range(config.consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(1.0, deadline - time.monotonic() + 5))
    seconds = time.perf_counter() - started
    used = counter.snapshot() - before
    sqs.delete_queue(QueueUrl=url)
    return FifoResult(label, groups, high_throughput, config.messages, len(tally.seen),
                      tally.duplicates, tally.out_of_order, round(seconds, 2), used.calls)


def table(results: Sequence[FifoResult]) -> str:
    """The figures as a Markdown table."""
    lines = ["| FIFO run | messages | messages/s | DynamoDB requests per message | "
             "duplicates | out of order |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.label} | {r.delivered}/{r.messages} | {r.messages_per_s} | "
              f"{r.requests_per_message} | {r.duplicates} | {r.out_of_order} |"
              for r in results]
    return "\n".join(lines)


def measure(config: FifoConfig) -> list[FifoResult]:
    """Every case on one DMQ server over a fresh data folder (removed at the end)."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-fifo-"))
    try:
        dmq = start_dmq(data_dir)
        try:
            dmq.wait_answering()
            counter = RemoteCounter(dmq.url)
            return [run_case(dmq.url, counter, label, groups, high, config)
                    for label, groups, high in CASES]
        finally:
            dmq.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> list[FifoResult]:
    """Run the three cases and print their table."""
    parser = argparse.ArgumentParser(prog="python -m bench.fifo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=None, help="per run (default 2000)")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="200 messages per run")
    args = parser.parse_args(argv)
    messages = args.messages or (200 if args.quick else 2000)
    results = measure(FifoConfig(messages, args.producers, args.consumers))
    print("\n" + table(results) + "\n", flush=True)
    return results


if __name__ == "__main__":
    main()
