"""The storage boundary: DynamoDB faults as typed store errors, for the message store and
the queue registry alike. Only this module looks inside a botocore error."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreError,
    StoreThrottledError,
    StoreUnavailableError,
    TransactionCancelledError,
)

THROTTLE_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)


def error_code(exc: ClientError) -> str:
    """The error code of a botocore ClientError."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def _typed(exc: ClientError) -> StoreError:
    """The store error a DynamoDB ClientError stands for, with what the caller needs of it."""
    code = error_code(exc)
    if code in THROTTLE_CODES:
        return StoreThrottledError(str(exc))
    if code == "ConditionalCheckFailedException":
        item = exc.response.get("Item")
        return ConditionFailedError(str(exc), dict(item) if isinstance(item, dict) else None)
    reasons = exc.response.get("CancellationReasons")
    if code == "TransactionCanceledException" and reasons:
        return TransactionCancelledError(str(exc), [dict(r) for r in reasons])
    return StoreError(str(exc))


@contextmanager
def translate_errors() -> Iterator[None]:
    """Map DynamoDB faults to store errors at the storage boundary."""
    try:
        yield
    except ClientError as exc:
        raise _typed(exc) from exc
    except BotoCoreError as exc:
        raise StoreUnavailableError(str(exc)) from exc


# Cancellation reasons that mean DynamoDB throttled one of a transaction's items.
THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})


def is_fault_answer(status: int, answer: Mapping[str, Any]) -> bool:
    """True when a DynamoDB answer says the store is failing or throttling: a 5xx, a
    throttle, a transaction cancelled for throttling. An answer that refuses the request
    itself (a failed condition, a validation error, a missing table) says the store works,
    and so does every success."""
    if status >= 500:
        return True
    if status < 400:
        return False
    code = str(answer.get("Error", {}).get("Code", ""))
    if code in THROTTLE_CODES:
        return True
    reasons = answer.get("CancellationReasons") or []
    return code == "TransactionCanceledException" and any(
        str(r.get("Code", "")) in THROTTLE_REASONS for r in reasons)


def is_store_fault(exc: BaseException) -> bool:
    """True when an exception a DynamoDB call raised means the store did not answer (a
    timeout, a refused or dropped connection) or answered with a fault. Anything else (no
    credentials, a bug) says nothing about the store."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return is_fault_answer(status, exc.response)
    return isinstance(exc, HTTPClientError | BotoConnectionError)


# Cancellation reasons that mean another writer changed an item first.
RACE_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict"})


def lost_race(exc: StoreError) -> bool:
    """True when a conditional write, or a transaction, lost to another writer: its
    condition failed, or DynamoDB cancelled it for a failed condition or a conflicting
    transaction on one of its items (not for throttling or a validation error)."""
    if isinstance(exc, ConditionFailedError):
        return True
    return isinstance(exc, TransactionCancelledError) and any(
        str(r.get("Code", "")) in RACE_REASONS for r in exc.reasons)
