"""The request's QueueUrl, parsed once by the protocol adapter (the parser itself is
`chalicelib.domain.queue_urls`): the `QueueTarget` travels in the request's context, and
routing, authorization, throttling, the action and metering all read that one. A URL
that names a region picks the services of that region when the deployment serves it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from chalicelib.domain import queue_urls as parser
from chalicelib.domain.queue_urls import (
    QueueTarget,
    could_be_queue,
    is_region,
    queue_of_request,
    region_of_base,
    target_of_path,
)
from chalicelib.service.exceptions import QueueDoesNotExistError

if TYPE_CHECKING:
    from chalicelib.frontend.services import Services

__all__ = ["QueueTarget", "could_be_queue", "is_region", "named_queue", "parse_queue_url",
           "queue_of_request", "region_of_base", "services_for_queue",
           "target_of_path"]


def parse_queue_url(url: str) -> QueueTarget:
    """The queue a QueueUrl names; anything else is QueueDoesNotExist."""
    target = parser.parse_queue_url(url)
    if target is None:
        raise QueueDoesNotExistError()
    return target


def named_queue(url: object) -> QueueTarget | None:
    """What a request's QueueUrl parameter names (None: it names none, or none well; the
    action refuses that as the parameter's rules say)."""
    return parser.parse_queue_url(url) if isinstance(url, str) else None


def services_for_queue(services_for: Callable[[str], Services], services: Services,
                       target: QueueTarget | None) -> Services:
    """The services of the region the QueueUrl names, when it names one this deployment
    serves (one of its regions, or any where any region is served); else `services`,
    those of the region the request is signed for."""
    region = target.region if target is not None else None
    if not region or region == services.region:
        return services
    settings = services.settings
    if region in settings.all_regions or settings.any_region:
        return services_for(region)
    return services
