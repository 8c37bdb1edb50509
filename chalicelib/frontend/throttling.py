"""The throttling check of the request path: which account and which queue a request
counts against (docs/throttling.md)."""

from __future__ import annotations

from chalicelib.domain.queues import queue_id_of
from chalicelib.frontend import admission
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services
from chalicelib.service import parking


def caller_account(context: RequestContext) -> str:
    """The account a request is counted against: the caller's own (the one its
    credential acts as), never the one a queue URL names."""
    return context.account


def queue_named(services: Services, context: RequestContext) -> str | None:
    """The queue id of the request's QueueUrl when that queue exists (its record is the
    one routing just read, from the metadata cache); None when it names none, or one that
    does not exist (the action itself reports it), so only real queues have buckets."""
    parts = context.queue_parts_or_none()
    if parts is None:
        return None
    queue_id = queue_id_of(*parts)
    return queue_id if services.queues.find(queue_id) is not None else None


def check_rate(services: Services, context: RequestContext, params: Params) -> None:
    """Count the request against its queue, and against the caller's account unless the
    front door did (`admission`); RequestThrottled (RateThrottledError) when either is
    over its rate."""
    throttle = services.throttle
    if throttle is None or not throttle.enabled or parking.resumed():
        return  # (a parked long poll served again was counted at its first serving)
    queue = queue_named(services, context) if throttle.queue_limit.enabled else None
    ticket = admission.current()
    if ticket is not None and ticket.charged:
        throttle.admit_queue(queue)
    else:
        throttle.admit(caller_account(context), queue)
