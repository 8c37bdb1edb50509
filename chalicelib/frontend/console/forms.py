"""The console's form actions: each reads its form, calls a service, and names the notice
the queue page shows after it (an SQS error is shown with the form as it was filled)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from chalicelib.domain.messages import AttributeValue
from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.services import Services
from chalicelib.service.exceptions import InvalidParameterValueError
from chalicelib.service.messages import SendRequest


def optional_int(form: Mapping[str, str], field_name: str, label: str) -> int | None:
    """An integer field, None when empty; InvalidParameterValue when not a number."""
    text = form.get(field_name, "").strip()
    if not text:
        return None
    if not text.lstrip("-").isdigit():
        raise InvalidParameterValueError(f"Value {text} for parameter {label} is invalid. "
                                         "Reason: it must be an integer.")
    return int(text)


def send(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    """SendMessage from the send form."""
    attributes: dict[str, AttributeValue] = {}
    attribute_name = form.get("attribute_name", "").strip()
    if attribute_name:
        data_type = form.get("attribute_type") or "String"
        attributes[attribute_name] = AttributeValue(data_type, form.get("attribute_value", ""))
    message = services.messages.send(queue, SendRequest(
        entry_id="console", body=form.get("body"),
        delay_seconds=optional_int(form, "delay_seconds", "DelaySeconds"),
        attributes=attributes,
        message_group_id=form.get("message_group_id") or None,
        deduplication_id=form.get("deduplication_id") or None,
    ))
    return f"notice=sent&message_id={quote(message.message_id, safe='')}"


def purge(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    """PurgeQueue, once the confirmation box is ticked."""
    if form.get("confirm") != "yes":
        raise InvalidParameterValueError(
            "Tick the box to confirm that every message of the queue is to be deleted.")
    services.queues.purge(queue)
    return "notice=purged"


def redrive(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    """StartMessageMoveTask from a dead-letter queue."""
    services.move_tasks.start(
        queue.arn, form.get("destination_arn") or None,
        optional_int(form, "max_per_second", "MaxNumberOfMessagesPerSecond"))
    return "notice=redrive"


def cancel(services: Services, queue: QueueRecord, form: dict[str, str]) -> str:
    """CancelMessageMoveTask of one of this queue's tasks."""
    handle = form.get("task_handle", "")
    if not any(t.handle == handle for t in services.move_tasks.list(queue.arn, 10)):
        raise InvalidParameterValueError("Value for parameter TaskHandle is invalid.")
    services.move_tasks.cancel(handle)
    return "notice=cancelled"
