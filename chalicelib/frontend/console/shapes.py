"""How the console shows things: peeked messages, move tasks, times, the peek limit."""

from __future__ import annotations

import base64
import time
from typing import Any

from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.move_tasks import MoveTask, MoveTaskStatus

PEEK_DEFAULT = 10
PEEK_MAX = 100
PEEK_BODY_CHARS = 4096


def peek_limit(given: str | None) -> int:
    """How many messages to peek: the `limit` asked for, within 1 and PEEK_MAX."""
    if given and given.isdigit():
        return max(1, min(int(given), PEEK_MAX))
    return PEEK_DEFAULT


def shown_attribute(value: AttributeValue) -> dict[str, str]:
    """An attribute's type and its value as text (binary values in base64)."""
    if value.binary_value is not None:
        shown = base64.b64encode(value.binary_value).decode("ascii") + " (base64)"
    else:
        shown = value.string_value or ""
    return {"type": value.data_type, "value": shown}


def peeked(message: Message, now: int) -> dict[str, Any]:
    """A message as the peek table shows it: state, body, attributes, system attributes."""
    state = ("delayed" if message.is_delayed(now)
             else "in flight" if message.visible_at > now else "visible")
    # Only what the message has: no first receive before one, no empty group.
    system = {k: v for k, v in message.system_values().items()
              if v or k != "MessageGroupId"}
    if not message.first_receive_ms:
        del system["ApproximateFirstReceiveTimestamp"]
    for key, attribute in sorted(message.system_attributes.items()):
        system[key] = shown_attribute(attribute)["value"]
    return {
        "id": message.message_id, "state": state, "sent_ms": message.sent_ms,
        "receive_count": message.receive_count, "md5": message.body_md5,
        "body": message.body[:PEEK_BODY_CHARS],
        "truncated": len(message.body) > PEEK_BODY_CHARS, "size": len(message.body),
        "attributes": {k: shown_attribute(v) for k, v in sorted(message.attributes.items())},
        "system": system,
    }


def task(task: MoveTask) -> dict[str, Any]:
    """A move task as the redrive table shows it."""
    return {"status": task.status.value, "moved": task.moved, "to_move": task.to_move,
            "destination": task.destination_arn or "the original source queues",
            "rate": task.max_per_second, "started_ms": task.started_ms,
            "failure": task.failure_reason, "active": task.status.active,
            "handle": task.handle if task.status is MoveTaskStatus.RUNNING else None}


def when(epoch_ms: int | None) -> str:
    """An epoch-ms time as UTC text."""
    if not epoch_ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch_ms / 1000))


def page_number(value: str | None) -> int:
    """A page number from the query string: 1 when missing or not a positive number."""
    try:
        number = int(value or "1")
    except ValueError:
        return 1
    return max(1, number)
