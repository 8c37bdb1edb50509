"""The chaos run's producers and consumers, and what they saw.

Producers send numbered bodies in batches of ten and retry what failed, as SDK users do
(a failed call is retried whole, even though its write may have landed). Consumers
receive, and delete what they received, retrying failed deletes. Every send that was
acknowledged and every delivery is recorded, so the run can tell lost messages from
duplicates, and duplicates of a send from redeliveries of one message.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.sqs import BATCH, sqs_client

ATTEMPTS = 30


@dataclass
class Tally:
    """What the clients saw, shared by every thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, list[str]] = field(default_factory=dict)  # body -> message ids
    deliveries: Counter[str] = field(default_factory=Counter)  # message id -> deliveries
    bodies: dict[str, set[str]] = field(default_factory=dict)  # body -> message ids seen
    given_up: int = 0  # sends never acknowledged after ATTEMPTS tries
    undeleted: set[str] = field(default_factory=set)  # deletes never acknowledged
    call_errors: Counter[str] = field(default_factory=Counter)  # SQS calls failed whole
    last_delivery: float = field(default_factory=time.monotonic)

    def delivered(self, message_id: str, body: str) -> None:
        """Record one delivery."""
        with self.lock:
            self.deliveries[message_id] += 1
            self.bodies.setdefault(body, set()).add(message_id)
            self.last_delivery = time.monotonic()

    def missing(self) -> set[str]:
        """Acknowledged bodies no consumer has received yet."""
        with self.lock:
            return set(self.acked) - set(self.bodies)


def _call(tally: Tally, name: str, call: Any, **kwargs: Any) -> dict[str, Any] | None:
    """One SQS call; None (and counted) when it failed after the SDK's own retries."""
    try:
        result: dict[str, Any] = call(**kwargs)
        return result
    except (BotoCoreError, ClientError):
        with tally.lock:
            tally.call_errors[name] += 1
        return None


def produce(endpoint: str, url: str, producer: int, count: int, tally: Tally) -> None:
    """Send `count` bodies in batches, retrying failed entries and failed calls."""
    sqs = sqs_client(endpoint, attempts=5, read_timeout=60)
    for first in range(0, count, BATCH):
        pending = {str(i): f"chaos-{producer:02d}-{first + i:06d}"
                   for i in range(min(BATCH, count - first))}
        for _ in range(ATTEMPTS):
            entries = [{"Id": k, "MessageBody": v} for k, v in pending.items()]
            result = _call(tally, "SendMessageBatch", sqs.send_message_batch,
                           QueueUrl=url, Entries=entries)
            if result is None:
                continue
            with tally.lock:
                for entry in result.get("Successful", []):
                    tally.acked.setdefault(pending[entry["Id"]], []).append(entry["MessageId"])
            pending = {f["Id"]: pending[f["Id"]] for f in result.get("Failed", [])}
            if not pending:
                break
        with tally.lock:
            tally.given_up += len(pending)


def consume(endpoint: str, url: str, tally: Tally, stop: threading.Event) -> None:
    """Receive and delete until told to stop."""
    sqs = sqs_client(endpoint, attempts=5, read_timeout=60)
    while not stop.is_set():
        result = _call(tally, "ReceiveMessage", sqs.receive_message, QueueUrl=url,
                       MaxNumberOfMessages=10, WaitTimeSeconds=1)
        messages = (result or {}).get("Messages", [])
        for message in messages:
            tally.delivered(message["MessageId"], message["Body"])
        if messages:
            _delete(sqs, url, messages, tally)


def _delete(sqs: Any, url: str, messages: list[dict[str, Any]], tally: Tally) -> None:
    pending = {str(i): m for i, m in enumerate(messages)}
    for _ in range(ATTEMPTS):
        entries = [{"Id": k, "ReceiptHandle": m["ReceiptHandle"]} for k, m in pending.items()]
        result = _call(tally, "DeleteMessageBatch", sqs.delete_message_batch,
                       QueueUrl=url, Entries=entries)
        if result is None:
            continue
        pending = {f["Id"]: pending[f["Id"]] for f in result.get("Failed", [])}
        if not pending:
            return
    with tally.lock:
        tally.undeleted |= {m["MessageId"] for m in pending.values()}
