"""Storage errors, raised at the DynamoDB boundary and mapped to SQS errors in one place."""

from __future__ import annotations


class StoreError(Exception):
    """The message store could not complete a request."""


class StoreThrottledError(StoreError):
    """DynamoDB throttled the request after the client's own retries."""


class StoreUnavailableError(StoreError):
    """DynamoDB timed out or failed; nothing is known to be written."""
