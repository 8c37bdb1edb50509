"""The errors the in-memory store answers with, in DynamoDB's JSON error shape."""

from __future__ import annotations

from typing import Any

PREFIX = "com.amazonaws.dynamodb.v20120810#"


class StoreError(Exception):
    """A refused call: its DynamoDB error code, message, HTTP status and extra fields
    (a cancelled transaction's `CancellationReasons`, a failed condition's `Item`)."""

    def __init__(self, code: str, message: str, status: int = 400,
                 **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer."""
        key = "Message" if self.code == "TransactionCanceledException" else "message"
        return {"__type": PREFIX + self.code, key: self.message, **self.extra}


def invalid(message: str) -> StoreError:
    """A ValidationException."""
    return StoreError("ValidationException", message)


def not_found(what: str = "") -> StoreError:
    """A ResourceNotFoundException for a table, index or stream."""
    text = "Requested resource not found" + (f": {what}" if what else "")
    return StoreError("ResourceNotFoundException", text)


def condition_failed(item: dict[str, Any] | None = None) -> StoreError:
    """A ConditionalCheckFailedException, with the item when the caller asked for it."""
    error = StoreError("ConditionalCheckFailedException", "The conditional request failed")
    if item is not None:
        error.extra["Item"] = item
    return error
