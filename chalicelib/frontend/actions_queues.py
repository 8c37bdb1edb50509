"""Queue actions: parse parameters, call the queue service, shape the response."""

from __future__ import annotations

import base64
from typing import Any

from chalicelib.domain.queues import QueueRecord
from chalicelib.frontend.context import (
    MAX_QUEUE_NAME,
    RequestContext,
    could_be_queue,
)
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services
from chalicelib.service.attributes import SHARD_COUNT
from chalicelib.service.exceptions import InvalidParameterValueError, QueueDoesNotExistError

Response = dict[str, Any]


def queue_of(svc: Services, ctx: RequestContext, p: Params) -> QueueRecord:
    """The active queue named by the QueueUrl parameter (as the adapter parsed it; a
    bare queue name is in the caller's account), as routing looked it up."""
    p.required_str("QueueUrl")
    if ctx.looked_up:
        return svc.queues.active(ctx.queue_record)
    return svc.queues.get(*ctx.queue_parts())


def create_queue(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """CreateQueue."""
    attributes = p.str_map("Attributes")
    record = svc.queues.create(
        ctx.account, ctx.region, p.required_str("QueueName"), attributes, p.str_map("tags"),
    )
    _pin_if_counted(svc, record, attributes)
    return {"QueueUrl": ctx.queue_url(record.account, record.name)}


def _pin_if_counted(svc: Services, record: QueueRecord, attributes: dict[str, str]) -> None:
    """A shard count the caller set (DmqShardCount) is theirs: the autoscaler leaves the
    queue alone until an admin unpins it (docs/autoscaling.md)."""
    if SHARD_COUNT in attributes and svc.autoscaler is not None:
        svc.autoscaler.pin(record, True)


def get_queue_url(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """GetQueueUrl."""
    account = p.optional_str("QueueOwnerAWSAccountId") or ctx.account
    name = p.required_str("QueueName")
    if not could_be_queue(account, name):
        raise QueueDoesNotExistError()
    record = svc.queues.get(account, name)
    return {"QueueUrl": ctx.queue_url(record.account, record.name)}


def _decode_token(token: str | None) -> str | None:
    if not token:
        return None
    try:
        name = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidParameterValueError("Invalid NextToken value.") from exc
    if not could_be_queue("account", name):  # a token holds the last queue name listed
        raise InvalidParameterValueError("Invalid NextToken value.")
    return name


def list_queues(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ListQueues with QueueNamePrefix, MaxResults and NextToken."""
    prefix = p.optional_str("QueueNamePrefix") or ""
    max_results, after = p.optional_int("MaxResults"), _decode_token(p.optional_str("NextToken"))
    if len(prefix) > MAX_QUEUE_NAME:  # no name starts with it: nothing to ask the store
        return {}
    names, last = svc.queues.list(ctx.account, prefix, max_results, after)
    response: Response = {}
    if names:
        response["QueueUrls"] = [ctx.queue_url(ctx.account, name) for name in names]
    if last:
        response["NextToken"] = base64.urlsafe_b64encode(last.encode()).decode()
    return response


def delete_queue(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """DeleteQueue."""
    svc.queues.delete(queue_of(svc, ctx, p))
    return {}


def purge_queue(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """PurgeQueue."""
    svc.queues.purge(queue_of(svc, ctx, p))
    return {}


def get_queue_attributes(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """GetQueueAttributes."""
    values = svc.queues.get_attributes(queue_of(svc, ctx, p), p.str_list("AttributeNames"))
    return {"Attributes": values} if values else {}


def set_queue_attributes(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """SetQueueAttributes."""
    queue = queue_of(svc, ctx, p)
    if p.raw("Attributes") is None:
        p.required_str("Attributes")
    attributes = p.str_map("Attributes")
    svc.queues.set_attributes(queue, attributes)
    _pin_if_counted(svc, queue, attributes)
    return {}


def add_permission(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """AddPermission."""
    queue = queue_of(svc, ctx, p)
    label = p.required_str("Label")
    if p.raw("AWSAccountIds") is None:
        p.required_str("AWSAccountIds")
    svc.queues.add_permission(queue, label, p.str_list("AWSAccountIds"), p.str_list("Actions"))
    return {}


def remove_permission(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """RemovePermission."""
    queue = queue_of(svc, ctx, p)
    svc.queues.remove_permission(queue, p.required_str("Label"))
    return {}


def tag_queue(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """TagQueue."""
    queue = queue_of(svc, ctx, p)
    if p.raw("Tags") is None:
        p.required_str("Tags")
    svc.queues.tag(queue, p.str_map("Tags"))
    return {}


def untag_queue(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """UntagQueue."""
    queue = queue_of(svc, ctx, p)
    if p.raw("TagKeys") is None:
        p.required_str("TagKeys")
    svc.queues.untag(queue, p.str_list("TagKeys"))
    return {}


def list_queue_tags(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ListQueueTags."""
    tags = queue_of(svc, ctx, p).tags
    return {"Tags": tags} if tags else {}


def list_dead_letter_source_queues(svc: Services, ctx: RequestContext, p: Params) -> Response:
    """ListDeadLetterSourceQueues, paged like ListQueues."""
    sources = sorted(svc.queues.dead_letter_sources(queue_of(svc, ctx, p)), key=lambda r: r.name)
    max_results = p.optional_int("MaxResults")
    if max_results is not None and not 1 <= max_results <= 1000:
        raise InvalidParameterValueError(
            f"Value {max_results} for parameter MaxResults is invalid. Reason: MaxResults "
            "must be an integer between 1 and 1000."
        )
    after = _decode_token(p.optional_str("NextToken"))
    if after:
        sources = [r for r in sources if r.name > after]
    page = sources[: max_results or 1000]
    response: Response = {"queueUrls": [ctx.queue_url(r.account, r.name) for r in page]}
    if max_results is not None and len(sources) > len(page):
        response["NextToken"] = base64.urlsafe_b64encode(page[-1].name.encode()).decode()
    return response
