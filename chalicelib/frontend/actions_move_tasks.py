"""Message move task actions: StartMessageMoveTask, ListMessageMoveTasks,
CancelMessageMoveTask (dead-letter redrive)."""

from __future__ import annotations

from typing import Any

from chalicelib.domain.move_tasks import MoveTask, MoveTaskStatus
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services

Response = dict[str, Any]


def start_message_move_task(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """StartMessageMoveTask."""
    task = svc.move_tasks.start(
        p.required_str("SourceArn"), p.optional_str("DestinationArn"),
        p.optional_int("MaxNumberOfMessagesPerSecond"),
    )
    return {"TaskHandle": task.handle}


def list_message_move_tasks(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ListMessageMoveTasks: the newest tasks first."""
    tasks = svc.move_tasks.list(p.required_str("SourceArn"), p.optional_int("MaxResults"))
    return {"Results": [_entry(t) for t in tasks]}


def cancel_message_move_task(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """CancelMessageMoveTask."""
    task = svc.move_tasks.cancel(p.required_str("TaskHandle"))
    return {"ApproximateNumberOfMessagesMoved": task.moved}


def _entry(task: MoveTask) -> Response:
    """One ListMessageMoveTasksResultEntry: the handle only while running, the rate only
    when it was given, the failure reason only when failed."""
    entry: Response = {
        "Status": task.status.value,
        "SourceArn": task.source_arn,
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move,
        "StartedTimestamp": task.started_ms,
    }
    if task.status is MoveTaskStatus.RUNNING:
        entry["TaskHandle"] = task.handle
    if task.destination_arn:
        entry["DestinationArn"] = task.destination_arn
    if task.max_per_second is not None:
        entry["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    if task.failure_reason:
        entry["FailureReason"] = task.failure_reason
    return entry
