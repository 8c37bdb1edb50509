"""Storage errors, raised at the DynamoDB boundary and mapped to SQS errors in one place."""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """The message store could not complete a request."""


class StoreThrottledError(StoreError):
    """DynamoDB throttled the request after the client's own retries."""


class StoreUnavailableError(StoreError):
    """DynamoDB timed out or failed; nothing is known to be written."""


class ClusterUnavailableError(StoreUnavailableError):
    """A cluster's store refused a call before making it: its circuit breaker is open, or
    all its concurrent-call slots are taken (docs/isolation.md). Nothing was sent, so
    nothing was written, and the request can be retried."""

    def __init__(self, cluster: str, reason: str) -> None:
        super().__init__(f"cluster {cluster} refused the call: {reason}")
        self.cluster = cluster
        self.reason = reason


class ConditionFailedError(StoreError):
    """A conditional write failed its condition. `item` is the item as it stood, when the
    write asked for it (ReturnValuesOnConditionCheckFailure), else None."""

    def __init__(self, message: str, item: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.item = item


class TransactionCancelledError(StoreError):
    """A transaction was cancelled: `reasons` holds one reason per item, in request order
    (each a dict with a `Code`, and the `Item` when the write asked for it)."""

    def __init__(self, message: str, reasons: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.reasons = reasons


class ConcurrentChangeError(Exception):
    """Another writer changed a queue record first (optimistic locking). Not a StoreError:
    the store worked; the write lost a race that the queue service retries."""
