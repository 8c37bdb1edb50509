"""The action table: every SQS action DMQ serves, by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.frontend import actions_messages as m
from chalicelib.frontend import actions_move_tasks as t
from chalicelib.frontend import actions_queues as q
from chalicelib.frontend.authn import authorize
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services
from chalicelib.frontend.throttling import check_rate
from chalicelib.service.exceptions import InvalidActionError

Action = Callable[[Services, RequestContext, Params], dict[str, Any]]

ACTIONS: dict[str, Action] = {
    "CreateQueue": q.create_queue,
    "GetQueueUrl": q.get_queue_url,
    "ListQueues": q.list_queues,
    "DeleteQueue": q.delete_queue,
    "GetQueueAttributes": q.get_queue_attributes,
    "SetQueueAttributes": q.set_queue_attributes,
    "PurgeQueue": q.purge_queue,
    "TagQueue": q.tag_queue,
    "UntagQueue": q.untag_queue,
    "ListQueueTags": q.list_queue_tags,
    "ListDeadLetterSourceQueues": q.list_dead_letter_source_queues,
    "AddPermission": q.add_permission,
    "RemovePermission": q.remove_permission,
    "SendMessage": m.send_message,
    "SendMessageBatch": m.send_message_batch,
    "ReceiveMessage": m.receive_message,
    "DeleteMessage": m.delete_message,
    "DeleteMessageBatch": m.delete_message_batch,
    "ChangeMessageVisibility": m.change_message_visibility,
    "ChangeMessageVisibilityBatch": m.change_message_visibility_batch,
    "StartMessageMoveTask": t.start_message_move_task,
    "ListMessageMoveTasks": t.list_message_move_tasks,
    "CancelMessageMoveTask": t.cancel_message_move_task,
}


def dispatch(
    action: str, services: Services, context: RequestContext, params: Params
) -> dict[str, Any]:
    """Run one action; an unknown one is InvalidAction."""
    handler = ACTIONS.get(action)
    if handler is None:
        raise InvalidActionError(f"The action {action} is not valid for this endpoint.")
    authorize(services, context, action, params)
    check_rate(services, context, params)
    return handler(services, context, params)
