"""The service objects a request needs, built once per container and region."""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib.clusters.autoscaler import Autoscaler
from chalicelib.clusters.manager import ClusterManager
from chalicelib.service.messages import MessageService
from chalicelib.service.move_tasks import MoveTaskService
from chalicelib.service.queues import QueueService
from chalicelib.service.request_dedup import RequestDedup
from chalicelib.service.throttling import Throttle
from chalicelib.settings import Settings


@dataclass(frozen=True)
class Services:
    """What the actions call into."""

    settings: Settings
    region: str
    queues: QueueService
    messages: MessageService
    clusters: ClusterManager
    move_tasks: MoveTaskService
    # Throttling (docs/throttling.md); None: every request is admitted.
    throttle: Throttle | None = None
    # Request deduplication of sends to standard queues (None when DMQ_REQUEST_DEDUP=off).
    request_dedup: RequestDedup | None = None
    # The shard autoscaler (docs/autoscaling.md); None where it is not built.
    autoscaler: Autoscaler | None = None
