"""What one SQS request counts for in the usage records: its queue, its payload bytes and
its outcome."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from chalicelib.frontend.queue_urls import queue_of_request
from chalicelib.service.exceptions import SqsError
from chalicelib.service.text import utf8_length
from chalicelib.usage.records import DENIED, OK

SEND_ACTIONS = frozenset({"SendMessage", "SendMessageBatch"})


def outcome_of(error: SqsError | None) -> str:
    """A usage record's outcome: ok, denied (the caller may not do it), or the error code."""
    if error is None:
        return OK
    return DENIED if error.code == "AccessDenied" else error.code


def queue_of(data: Mapping[str, Any]) -> str:
    """The queue a request names (`<account>/<name>`): its QueueUrl, or QueueName, or ''.
    A bare queue name is given as it is (usage records put it in the caller's account)."""
    return queue_of_request(data.get("QueueUrl"), data.get("QueueName"))


def queue_named(data: Mapping[str, Any], parsed: tuple[str, str] | None) -> str:
    """`queue_of` from the adapter's one parse of the QueueUrl: `parsed` is what it named
    (None: nothing well)."""
    url = data.get("QueueUrl")
    if isinstance(url, str) and url:
        return "/".join(parsed) if parsed is not None else ""
    name = data.get("QueueName")
    return name if isinstance(name, str) else ""


def _attribute_bytes(attributes: Any) -> int:
    """Name, type and value bytes of message attributes, as SQS counts them for size."""
    if not isinstance(attributes, Mapping):
        return 0
    total = 0
    for name, value in attributes.items():
        if not isinstance(value, Mapping):
            continue
        total += utf8_length(str(name)) + utf8_length(str(value.get("DataType", "")))
        text = value.get("StringValue")
        if isinstance(text, str):
            total += utf8_length(text)
        binary = value.get("BinaryValue")
        if isinstance(binary, str):
            try:
                total += len(base64.b64decode(binary, validate=True))
            except (binascii.Error, ValueError):
                total += len(binary)
    return total


def _message_bytes(message: Mapping[str, Any], body_key: str) -> int:
    body = message.get(body_key)
    size = utf8_length(body) if isinstance(body, str) else 0
    return size + _attribute_bytes(message.get("MessageAttributes"))


def payload_bytes(action: str, data: Mapping[str, Any], result: Mapping[str, Any] | None) -> int:
    """Message bytes a request carried: sent bodies and attributes, or received ones."""
    if action == "SendMessage":
        return _message_bytes(data, "MessageBody")
    if action == "SendMessageBatch":
        entries = data.get("Entries")
        return sum(_message_bytes(e, "MessageBody") for e in entries
                   if isinstance(e, Mapping)) if isinstance(entries, list) else 0
    if action == "ReceiveMessage" and result is not None:
        messages = result.get("Messages", [])
        return sum(_message_bytes(m, "Body") for m in messages if isinstance(m, Mapping))
    return 0
