"""What botocore's standard retry mode does with an error response, for tests that check
that every failure a client sees is one its SDK retries."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import ClientError
from botocore.retries.standard import RetryContext, StandardRetryConditions


def retried_by_sdks(client: Any, operation: str, error: ClientError) -> bool:
    """What botocore's standard retry mode decides for this error response."""
    status = error.response["ResponseMetadata"]["HTTPStatusCode"]
    context = RetryContext(
        attempt_number=1,
        operation_model=client.meta.service_model.operation_model(operation),
        parsed_response=error.response,
        http_response=SimpleNamespace(status_code=status),
    )
    return bool(StandardRetryConditions().is_retryable(context))


def outcome(client: Any, operation: str, call: Callable[[], Any]) -> str:
    """"ok", or "retryable|final:<code>:<status>:<message start>" for a failed call."""
    try:
        call()
    except ClientError as exc:
        error = exc.response["Error"]["Code"]
        kind = "retryable" if retried_by_sdks(client, operation, exc) else "final"
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        return f"{kind}:{error}:{status}:{exc.response['Error']['Message'][:60]}"
    return "ok"
