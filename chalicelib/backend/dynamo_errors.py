"""DynamoDB faults as store errors, and what a failed conditional write says."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.domain.exceptions import StoreError, StoreThrottledError, StoreUnavailableError

THROTTLE_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)


def error_code(exc: ClientError) -> str:
    """The error code of a botocore ClientError."""
    return str(exc.response.get("Error", {}).get("Code", ""))


@contextmanager
def translate_errors() -> Iterator[None]:
    """Map DynamoDB faults to store errors at the storage boundary."""
    try:
        yield
    except ClientError as exc:
        if error_code(exc) in THROTTLE_CODES:
            raise StoreThrottledError(str(exc)) from exc
        raise StoreError(str(exc)) from exc
    except BotoCoreError as exc:
        raise StoreUnavailableError(str(exc)) from exc


def is_condition_failure(exc: StoreError) -> bool:
    """True when a single conditional write failed its condition."""
    cause = exc.__cause__
    return isinstance(cause, ClientError) and error_code(cause) == "ConditionalCheckFailedException"


def cancellation_reasons(exc: StoreError) -> list[dict[str, Any]] | None:
    """The per-item reasons of a cancelled transaction; None for any other error."""
    cause = exc.__cause__
    if not isinstance(cause, ClientError) or error_code(cause) != "TransactionCanceledException":
        return None
    reasons = cause.response.get("CancellationReasons")
    return [dict(r) for r in reasons] if reasons else None
