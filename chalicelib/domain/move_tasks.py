"""Message move tasks (dead-letter redrive): the task record, its handle, its rate, and the
message as a redrive delivers it. Pure code: no storage, no clock of its own."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from enum import StrEnum

from chalicelib.domain.messages import Message

# SQS's bounds and defaults (StartMessageMoveTask, ListMessageMoveTasks).
MIN_RATE = 1
MAX_RATE = 500
MIN_RESULTS = 1
MAX_RESULTS = 10
DEFAULT_RESULTS = 1
# How many tasks of one source ListMessageMoveTasks can show (its MaxResults at most).
KEPT_PER_SOURCE = MAX_RESULTS
# A task with no MaxNumberOfMessagesPerSecond moves at SQS's highest rate.
DEFAULT_RATE = MAX_RATE
# The unused allowance a task may save up: one second of its rate.
BURST_MS = 1000


class MoveTaskStatus(StrEnum):
    """The states of a task, as ListMessageMoveTasks names them."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"

    @property
    def active(self) -> bool:
        """A running or cancelling task holds its source: no second task may start."""
        return self in (MoveTaskStatus.RUNNING, MoveTaskStatus.CANCELLING)


@dataclass(frozen=True)
class MoveTask:
    """One task. `paced_ms` is the time up to which its rate has been spent: the task may
    move `rate * (now - paced_ms)` messages, saving up at most one second's worth."""

    task_id: str
    source_arn: str
    destination_arn: str | None
    max_per_second: int | None
    status: MoveTaskStatus
    started_ms: int
    to_move: int
    moved: int = 0
    failure_reason: str | None = None
    paced_ms: int = 0

    @property
    def handle(self) -> str:
        """The TaskHandle SQS gives out: base64 of `{"taskId":...,"sourceArn":...}`."""
        return encode_handle(self.task_id, self.source_arn)

    @property
    def rate(self) -> int:
        """Messages per second this task may move."""
        return self.max_per_second or DEFAULT_RATE

    def allowance(self, now_ms: int) -> int:
        """How many messages the task may move now."""
        since = min(max(0, now_ms - self.paced_ms), BURST_MS)
        return self.rate * since // 1000

    def paced_after(self, moved: int, now_ms: int) -> int:
        """`paced_ms` once `moved` messages are spent at `now_ms` (unused time beyond the
        burst is forgotten, so a task idle for long does not then move in a rush)."""
        start = max(self.paced_ms, now_ms - BURST_MS)
        return start + moved * 1000 // self.rate

    def with_changes(self, **changes: object) -> MoveTask:
        """A copy with some fields replaced."""
        return replace(self, **changes)  # type: ignore[arg-type]


def encode_handle(task_id: str, source_arn: str) -> str:
    """A task handle in SQS's format: base64 of a JSON document naming task and source."""
    doc = json.dumps({"taskId": task_id, "sourceArn": source_arn}, separators=(",", ":"))
    return base64.b64encode(doc.encode("utf-8")).decode("ascii")


def decode_handle(handle: str) -> tuple[str, str] | None:
    """(task id, source ARN) from a handle; None when it is not one."""
    try:
        doc = json.loads(base64.b64decode(handle.encode("ascii"), validate=True))
    except (ValueError, UnicodeError, binascii.Error):
        return None
    if not isinstance(doc, dict):
        return None
    task_id, source_arn = doc.get("taskId"), doc.get("sourceArn")
    if not isinstance(task_id, str) or not isinstance(source_arn, str) or not task_id:
        return None
    return task_id, source_arn


def redriven(message: Message, new_id: str, now_ms: int, retention_ms: int) -> Message:
    """The message as a redrive delivers it: SQS treats it as a new message, with a new
    message id and enqueue time, so its retention starts again; it is visible at once,
    unreceived (receive count, first receive and claim reset), and no longer a dead letter."""
    return message.with_changes(
        message_id=new_id, sent_ms=now_ms, visible_at=now_ms, expires_ms=now_ms + retention_ms,
        receive_count=0, first_receive_ms=0, claim_token="", dead_letter_source_arn=None,
        body_key=None, attributes_key=None,
    )
