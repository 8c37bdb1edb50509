"""The batch a push target receives: Lambda's SQS event, record for record."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.service.checksums import md5_of_attributes

EVENT_SOURCE = "aws:sqs"


def _attributes(message: Message) -> dict[str, str]:
    """The system attributes Lambda puts in `attributes` (every one the message has)."""
    return message.system_values()


def _attribute(value: AttributeValue) -> dict[str, Any]:
    """One message attribute in the event's lower-camel shape."""
    shown: dict[str, Any] = {"stringListValues": [], "binaryListValues": [],
                             "dataType": value.data_type}
    if value.is_binary:
        shown["binaryValue"] = base64.b64encode(value.binary_value or b"").decode()
    else:
        shown["stringValue"] = value.string_value
    return shown


def record(queue: QueueRecord, message: Message, receipt_handle: str,
           region: str) -> dict[str, Any]:
    """One message as a record of Lambda's SQS event."""
    shown: dict[str, Any] = {
        "messageId": message.message_id,
        "receiptHandle": receipt_handle,
        "body": message.body,
        "attributes": _attributes(message),
        "messageAttributes": {k: _attribute(v) for k, v in message.attributes.items()},
        "md5OfBody": message.body_md5,
    }
    digest = md5_of_attributes(message.attributes)
    if digest is not None:
        shown["md5OfMessageAttributes"] = digest
    shown.update(eventSource=EVENT_SOURCE, eventSourceARN=queue.arn, awsRegion=region)
    return shown


def event(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The event a target receives for a batch."""
    return {"Records": list(records)}
