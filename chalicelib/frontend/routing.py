"""Requests for a queue go to its home region: only the home serves it, so that two regions
never hand out the same message. A request that reaches a replica region is forwarded:
it is served there with the home region's stores, as if it had reached the home."""

from __future__ import annotations

from collections.abc import Callable

from chalicelib.domain.queues import QueueStatus, queue_id_of
from chalicelib.frontend.context import parse_queue_url
from chalicelib.frontend.params import Params
from chalicelib.frontend.services import Services

# Actions that name no queue, or that read only what every region holds.
LOCAL_ACTIONS = frozenset({"CreateQueue", "GetQueueUrl", "ListQueues"})


def route(
    services_for: Callable[[str], Services], services: Services, action: str, params: Params,
) -> Services:
    """The services of the queue's home region (the local ones if it is home, or unknown,
    or a region this deployment does not serve)."""
    url = params.raw("QueueUrl")
    if action in LOCAL_ACTIONS or not isinstance(url, str):
        return services
    try:
        account, name = parse_queue_url(url)
    except Exception:  # noqa: BLE001 - the action itself reports a bad URL
        return services
    record = services.queues.find(queue_id_of(account, name))
    if record is None or record.status is not QueueStatus.ACTIVE or record.home == services.region:
        return services
    if record.home not in services.settings.all_regions:
        return services  # a home outside the deployment (recorded before regions were checked)
    return services_for(record.home)
