"""Counts the DynamoDB requests DMQ makes, with botocore event hooks on its messages client."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import app as dmq_app
from chalicelib.service.messages import ReceiveStats

OPERATIONS = (
    "Query", "PutItem", "BatchWriteItem", "UpdateItem", "TransactWriteItems", "DeleteItem",
    "GetItem",
)
_STARTED = "dmq_bench_started"
_OPERATION = "dmq_bench_operation"


@dataclass(frozen=True)
class DynamoSnapshot:
    """Cumulative DynamoDB figures at one moment; subtract two to get a phase's share."""

    calls: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    items_returned: int = 0
    items_scanned: int = 0

    @property
    def total_calls(self) -> int:
        """Every request, whatever its operation."""
        return sum(self.calls.values())

    def __sub__(self, earlier: DynamoSnapshot) -> DynamoSnapshot:
        return self._combine(earlier, -1)

    def __add__(self, other: DynamoSnapshot) -> DynamoSnapshot:
        return self._combine(other, 1)

    def _combine(self, other: DynamoSnapshot, sign: int) -> DynamoSnapshot:
        def merge(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
            values = {k: mine.get(k, 0) + sign * theirs.get(k, 0)
                      for k in sorted(set(mine) | set(theirs))}
            return {k: v for k, v in values.items() if v}

        return DynamoSnapshot(
            calls=merge(self.calls, other.calls),
            errors=merge(self.errors, other.errors),
            seconds=merge(self.seconds, other.seconds),
            items_returned=self.items_returned + sign * other.items_returned,
            items_scanned=self.items_scanned + sign * other.items_scanned,
        )


class DynamoCounter:
    """Counts requests per operation on one botocore DynamoDB client.

    A request counts once however many times botocore retries it. Items read are the
    `Count` and `ScannedCount` of Query responses; the time is from `before-call` to
    `after-call`, so it includes the store's own processing and any wait for it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._errors: dict[str, int] = {}
        self._seconds: dict[str, float] = {}
        self._returned = 0
        self._scanned = 0
        self._client: Any = None

    def attach(self, client: Any) -> None:
        """Register the hooks on `client` (a botocore DynamoDB client)."""
        self._client = client
        client.meta.events.register("before-call.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)
        client.meta.events.register("after-call-error.dynamodb", self._after_error)

    def detach(self) -> None:
        """Remove the hooks."""
        if self._client is not None:
            self._client.meta.events.unregister("before-call.dynamodb", self._before)
            self._client.meta.events.unregister("after-call.dynamodb", self._after)
            self._client.meta.events.unregister("after-call-error.dynamodb", self._after_error)
            self._client = None

    def snapshot(self) -> DynamoSnapshot:
        """The figures so far."""
        with self._lock:
            return DynamoSnapshot(dict(self._calls), dict(self._errors), dict(self._seconds),
                                  self._returned, self._scanned)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        context[_STARTED] = time.perf_counter()
        context[_OPERATION] = model.name
        with self._lock:
            self._calls[model.name] = self._calls.get(model.name, 0) + 1

    def _after(self, model: Any, parsed: dict[str, Any], context: dict[str, Any],
               **_: Any) -> None:
        self._finish(model.name, context, failed="Error" in parsed)
        if model.name == "Query" and "Error" not in parsed:
            with self._lock:
                self._returned += int(parsed.get("Count", 0))
                self._scanned += int(parsed.get("ScannedCount", 0))

    def _after_error(self, context: dict[str, Any], **_: Any) -> None:
        self._finish(str(context.get(_OPERATION, "?")), context, failed=True)

    def _finish(self, name: str, context: dict[str, Any], failed: bool) -> None:
        elapsed = time.perf_counter() - float(context.get(_STARTED, time.perf_counter()))
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + elapsed
            if failed:
                self._errors[name] = self._errors.get(name, 0) + 1


def messages_client() -> Any:
    """The botocore client DMQ's message store uses (the messages table only).

    Queue metadata goes through PynamoDB's own client, whose reads DMQ caches; it is
    not counted.
    """
    store: Any = dmq_app.runtime.backend().stores.of("default")
    return store._db  # the store keeps its client private; the benchmark only observes it


def receive_stats() -> ReceiveStats:
    """A copy of DMQ's receive counters (receives, returned, items read, lost claims)."""
    stats = dmq_app.runtime.services_for().messages.stats
    return ReceiveStats(stats.receives, stats.returned, stats.items_read, stats.lost_claims)


def stats_delta(after: ReceiveStats, before: ReceiveStats) -> ReceiveStats:
    """What happened to the receive counters between two copies."""
    return ReceiveStats(
        after.receives - before.receives, after.returned - before.returned,
        after.items_read - before.items_read, after.lost_claims - before.lost_claims,
    )
