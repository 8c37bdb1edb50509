"""Throughput: producers send batches of ten while consumers receive and delete them."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.counting import DynamoCounter, receive_stats, stats_delta
from bench.sqs import BATCH, entries, retries_of
from bench.timing import Latency, Recorder

SEND, RECEIVE, DELETE = "SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch"


@dataclass(frozen=True)
class ThroughputConfig:
    """The size of the run."""

    messages: int
    producers: int
    consumers: int
    body_bytes: int = 256
    timeout_s: float = 600.0
    shards: int = 1
    queue_name: str = "dmq-bench-throughput"


@dataclass(frozen=True)
class ThroughputResult:
    """What one throughput run measured."""

    messages: int
    producers: int
    consumers: int
    sent: int
    delivered: int
    duplicates: int
    failed_sends: int
    failed_deletes: int
    errors: int
    sdk_retries: int
    seconds: float
    messages_per_s: float
    send_batch: Latency
    receive: Latency
    empty_receives: int
    delete_batch: Latency
    dynamodb_requests_per_message: float
    dynamodb_per_message: dict[str, float]
    dynamodb_calls: dict[str, int]
    dynamodb_errors: dict[str, int]
    dmq_receives: int
    lost_claims: int
    failed_claims_per_receive: float
    items_read_per_returned: float


@dataclass
class _State:
    """What the worker threads share."""

    batches: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_batch: int = 0
    sent: int = 0
    failed_sends: int = 0
    failed_deletes: int = 0
    errors: int = 0
    retries: int = 0
    empty: int = 0
    duplicates: int = 0
    delivered: set[str] = field(default_factory=set)
    producers_done: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    finished_at: float = 0.0

    def check_done(self) -> None:
        """Called under the lock: every sent message has been deleted once."""
        if self.producers_done.is_set() and len(self.delivered) >= self.sent:
            if not self.done.is_set():
                self.finished_at = time.perf_counter()
            self.done.set()


class _Run:
    def __init__(self, sqs: Any, url: str, config: ThroughputConfig) -> None:
        self.sqs = sqs
        self.url = url
        self.config = config
        self.state = _State(batches=-(-config.messages // BATCH))
        self.recorder = Recorder()
        self.deadline = time.monotonic() + config.timeout_s

    def produce(self) -> None:
        state, size = self.state, self.config.body_bytes
        while time.monotonic() < self.deadline:
            with state.lock:
                batch = state.next_batch
                if batch >= state.batches:
                    return
                state.next_batch += 1
            first = batch * BATCH
            count = min(BATCH, self.config.messages - first)
            try:
                with self.recorder.timed(SEND):
                    result = self.sqs.send_message_batch(QueueUrl=self.url,
                                                         Entries=entries(first, count, size))
            except (BotoCoreError, ClientError):
                with state.lock:
                    state.errors += 1
                    state.failed_sends += count
                continue
            with state.lock:
                state.sent += len(result.get("Successful", []))
                state.failed_sends += len(result.get("Failed", []))
                state.retries += retries_of(result)

    def consume(self) -> None:
        state = self.state
        while not state.done.is_set() and time.monotonic() < self.deadline:
            try:
                self._receive_and_delete()
            except (BotoCoreError, ClientError):
                with state.lock:
                    state.errors += 1

    def _receive_and_delete(self) -> None:
        state = self.state
        started = time.perf_counter()
        result = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=BATCH,
                                          WaitTimeSeconds=1)
        elapsed = time.perf_counter() - started
        messages = result.get("Messages", [])
        if not messages:
            with state.lock:
                state.empty += 1
                state.retries += retries_of(result)
                state.check_done()
            return
        self.recorder.add(RECEIVE, elapsed)
        handles = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                   for n, m in enumerate(messages)]
        with self.recorder.timed(DELETE):
            deleted = self.sqs.delete_message_batch(QueueUrl=self.url, Entries=handles)
        ok = {entry["Id"] for entry in deleted.get("Successful", [])}
        with state.lock:
            state.retries += retries_of(result) + retries_of(deleted)
            state.failed_deletes += len(deleted.get("Failed", []))
            for n, message in enumerate(messages):
                if str(n) not in ok:
                    continue
                if message["MessageId"] in state.delivered:
                    state.duplicates += 1
                state.delivered.add(message["MessageId"])
            state.check_done()


def run_throughput(sqs: Any, counter: DynamoCounter, config: ThroughputConfig) -> ThroughputResult:
    """Run producers and consumers on a fresh queue until every message is deleted."""
    url = sqs.create_queue(QueueName=config.queue_name,
                           Attributes={"DmqShardCount": str(config.shards)})["QueueUrl"]
    run = _Run(sqs, url, config)
    dynamo_before, stats_before = counter.snapshot(), receive_stats()
    consumers = [threading.Thread(target=run.consume, name=f"bench-consumer-{n}")
                 for n in range(config.consumers)]
    producers = [threading.Thread(target=run.produce, name=f"bench-producer-{n}")
                 for n in range(config.producers)]
    started = time.perf_counter()
    for thread in consumers + producers:
        thread.start()
    for thread in producers:
        thread.join()
    with run.state.lock:
        run.state.producers_done.set()
        run.state.check_done()
    for thread in consumers:
        thread.join()
    state = run.state
    seconds = (state.finished_at or time.perf_counter()) - started
    dynamo = counter.snapshot() - dynamo_before
    stats = stats_delta(receive_stats(), stats_before)
    sqs.delete_queue(QueueUrl=url)
    delivered = len(state.delivered)
    per = max(delivered, 1)
    return ThroughputResult(
        messages=config.messages, producers=config.producers, consumers=config.consumers,
        sent=state.sent, delivered=delivered, duplicates=state.duplicates,
        failed_sends=state.failed_sends, failed_deletes=state.failed_deletes,
        errors=state.errors, sdk_retries=state.retries, seconds=round(seconds, 2),
        messages_per_s=round(delivered / seconds, 1) if seconds > 0 else 0.0,
        send_batch=run.recorder.summary(SEND), receive=run.recorder.summary(RECEIVE),
        empty_receives=state.empty, delete_batch=run.recorder.summary(DELETE),
        dynamodb_requests_per_message=round(dynamo.total_calls / per, 3),
        dynamodb_per_message={op: round(n / per, 3) for op, n in dynamo.calls.items()},
        dynamodb_calls=dict(dynamo.calls), dynamodb_errors=dict(dynamo.errors),
        dmq_receives=stats.receives, lost_claims=stats.lost_claims,
        failed_claims_per_receive=round(stats.lost_claims / max(stats.receives, 1), 3),
        items_read_per_returned=round(dynamo.items_scanned / max(stats.returned, 1), 3),
    )
