"""The one place that turns any exception into the SQS error a client receives."""

from __future__ import annotations

import logging

from chalicelib.domain.exceptions import (
    ClusterUnavailableError,
    ConcurrentChangeError,
    StoreError,
    StoreThrottledError,
    StoreUnavailableError,
)
from chalicelib.domain.fair_share import WaitShareExceeded
from chalicelib.service.exceptions import (
    InternalError,
    RateThrottledError,
    RequestThrottledError,
    ServiceUnavailableError,
    SqsError,
)

logger = logging.getLogger("dmq.frontend")


def to_sqs_error(exc: Exception) -> SqsError:
    """Map service, storage and unexpected errors onto SQS errors."""
    if isinstance(exc, SqsError):
        return exc
    if isinstance(exc, WaitShareExceeded):
        # The account's long polls in progress are at their cap (docs/throttling.md):
        # RequestThrottled, which SDKs retry with backoff.
        return RateThrottledError(str(exc))
    if isinstance(exc, ConcurrentChangeError):
        # Requests kept changing one queue's record at once, past the queue service's own
        # retries: the loser gets an error the SDKs retry.
        return ServiceUnavailableError(
            "The queue was changed by other requests at the same time; retry the request.")
    if isinstance(exc, ClusterUnavailableError):
        # The cluster's bulkhead or circuit breaker refused a store call before making it
        # (docs/isolation.md): a 503, which every SDK retries.
        return ServiceUnavailableError(
            f"Cluster {exc.cluster} is unavailable at the moment; retry the request.")
    if isinstance(exc, StoreThrottledError):
        return RequestThrottledError("Request is throttled; retry with backoff.")
    if isinstance(exc, StoreUnavailableError):
        return ServiceUnavailableError("The service is unavailable; retry the request.")
    if isinstance(exc, StoreError):
        logger.warning("store error: %s", exc)
        return ServiceUnavailableError("The service is unavailable; retry the request.")
    logger.exception("unexpected error")
    return InternalError("We encountered an internal error. Please try again.")
