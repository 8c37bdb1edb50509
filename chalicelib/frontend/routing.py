"""Requests for a queue go to its home region: only the home serves it, so that two regions
never hand out the same message. A request that reaches a replica region is forwarded:
it is served there with the home region's stores, as if it had reached the home."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from chalicelib.domain.queues import QueueStatus, queue_id_of
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.services import Services

# Actions that name no queue, or that read only what every region holds.
LOCAL_ACTIONS = frozenset({"CreateQueue", "GetQueueUrl", "ListQueues"})


def route(
    services_for: Callable[[str], Services], services: Services, action: str,
    context: RequestContext,
) -> tuple[Services, RequestContext]:
    """The services of the queue's home region (the local ones if it is home, or unknown,
    or a region this deployment does not serve), and the context to serve it with. The
    queue is the one the request's QueueUrl names, as the adapter parsed it (a bad URL:
    the action reports it). Served here, the context carries the record looked up (or
    that there is none), and the action does not look it up again; forwarded, the home
    region reads its own."""
    parts = context.queue_parts_or_none()
    if action in LOCAL_ACTIONS or parts is None:
        return services, context
    record = services.queues.find(queue_id_of(*parts))
    if (record is not None and record.status is QueueStatus.ACTIVE
            and record.home != services.region
            # a home outside the deployment was recorded before regions were checked
            and record.home in services.settings.all_regions):
        return services_for(record.home), context
    return services, replace(context, queue_record=record, looked_up=True)
