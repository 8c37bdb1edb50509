"""Requests for a queue go to its home region: only the home serves it, so that two regions
never hand out the same message. A request that reaches a replica region is forwarded:
it is served there with the home region's stores, as if it had reached the home."""

from __future__ import annotations

from collections.abc import Callable

from chalicelib.domain.queues import QueueStatus, queue_id_of
from chalicelib.frontend.context import RequestContext
from chalicelib.frontend.services import Services

# Actions that name no queue, or that read only what every region holds.
LOCAL_ACTIONS = frozenset({"CreateQueue", "GetQueueUrl", "ListQueues"})


def route(
    services_for: Callable[[str], Services], services: Services, action: str,
    context: RequestContext,
) -> Services:
    """The services of the queue's home region (the local ones if it is home, or unknown,
    or a region this deployment does not serve). The queue is the one the request's
    QueueUrl names, as the adapter parsed it (a bad URL: the action reports it)."""
    parts = context.queue_parts_or_none()
    if action in LOCAL_ACTIONS or parts is None:
        return services
    record = services.queues.find(queue_id_of(*parts))
    if record is None or record.status is not QueueStatus.ACTIVE or record.home == services.region:
        return services
    if record.home not in services.settings.all_regions:
        return services  # a home outside the deployment (recorded before regions were checked)
    return services_for(record.home)
