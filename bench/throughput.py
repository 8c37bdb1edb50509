"""Lifecycle throughput: producers send batches of ten while consumers receive and delete
them; each worker thread has a boto3 client of its own."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.counting import Counter
from bench.sqs import BATCH, entries, retries_of, sqs_client
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
    received: int = 0
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
    def __init__(self, endpoint: str, url: str, config: ThroughputConfig) -> None:
        self.endpoint = endpoint
        self.url = url
        self.config = config
        self.state = _State(batches=-(-config.messages // BATCH))
        self.recorder = Recorder()
        self.deadline = time.monotonic() + config.timeout_s

    def produce(self) -> None:
        state, size = self.state, self.config.body_bytes
        sqs = sqs_client(self.endpoint)
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
                    result = sqs.send_message_batch(QueueUrl=self.url,
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
        sqs = sqs_client(self.endpoint)
        while not state.done.is_set() and time.monotonic() < self.deadline:
            try:
                self._receive_and_delete(sqs)
            except (BotoCoreError, ClientError):
                with state.lock:
                    state.errors += 1

    def _receive_and_delete(self, sqs: Any) -> None:
        state = self.state
        started = time.perf_counter()
        result = sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=BATCH,
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
            deleted = sqs.delete_message_batch(QueueUrl=self.url, Entries=handles)
        ok = {entry["Id"] for entry in deleted.get("Successful", [])}
        with state.lock:
            state.received += len(messages)
            state.retries += retries_of(result) + retries_of(deleted)
            state.failed_deletes += len(deleted.get("Failed", []))
            for n, message in enumerate(messages):
                if str(n) not in ok:
                    continue
                if message["MessageId"] in state.delivered:
                    state.duplicates += 1
                state.delivered.add(message["MessageId"])
            state.check_done()


def run_throughput(endpoint: str, counter: Counter, config: ThroughputConfig) -> ThroughputResult:
    """Run producers and consumers on a fresh queue until every message is deleted."""
    sqs = sqs_client(endpoint)
    attributes = {"DmqShardCount": str(config.shards)} if config.shards > 1 else {}
    url = sqs.create_queue(QueueName=config.queue_name,
                           Attributes=attributes)["QueueUrl"]
    run = _Run(endpoint, url, config)
    dynamo_before = counter.snapshot()
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
        items_read_per_returned=round(dynamo.items_scanned / max(state.received, 1), 3),
    )
