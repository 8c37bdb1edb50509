"""Builds the object graph once per container: clients, stores, repositories, services."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from chalicelib.aws import Clients
from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.clusters import ClusterStores
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.backend.receipts import ReceiptCodec
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock, SystemClock
from chalicelib.frontend.services import Services
from chalicelib.metadata.repository import QueueRepository
from chalicelib.metadata.types import QueueRecord
from chalicelib.service.messages import MessageService
from chalicelib.service.queues import QueueService
from chalicelib.settings import Settings, get_settings


@dataclass(frozen=True)
class Backend:
    """What the stream and schedule handlers work with."""

    stores: ClusterStores
    bodies: BodyStore
    repo: QueueRepository
    clock: Clock


class Runtime:
    """The container's objects, built lazily on first use."""

    def __init__(self, settings: Settings | None = None, clock: Clock | None = None) -> None:
        self._settings = settings
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._built: tuple[Services, Backend] | None = None

    @property
    def settings(self) -> Settings:
        """The settings in force."""
        return self._settings or get_settings()

    def services_for(self, region: str = "") -> Services:
        """The services (one region for now: every region shares the configured store)."""
        return self._get()[0]

    def backend(self) -> Backend:
        """The stores the back-end handlers use."""
        return self._get()[1]

    def _get(self) -> tuple[Services, Backend]:
        with self._lock:
            if self._built is None:
                self._built = self._build(self.settings)
            return self._built

    def _build(self, settings: Settings) -> tuple[Services, Backend]:
        clients = Clients(settings)
        bodies = BodyStore(clients.s3, settings.bodies_bucket)
        stores = ClusterStores({
            cluster: DynamoMessageStore(clients.dynamodb, settings.cluster_table(cluster), bodies,
                                        settings.inline_body_limit)
            for cluster in settings.clusters
        })
        repo = QueueRepository(
            settings.queues_table, settings.region, settings.dynamodb_endpoint,
            settings.metadata_cache_seconds,
        )
        holder: list[QueueService] = []

        def queue_by_arn(arn: str) -> QueueRecord | None:
            return holder[0].by_arn(arn)

        messages = MessageService(
            stores, ReceiptCodec(settings.receipt_key), self._clock, Wakeups(),
            queue_by_arn, settings.long_poll_interval_ms,
        )
        queues = QueueService(repo, messages, self._clock)
        holder.append(queues)
        return Services(settings, queues, messages), Backend(stores, bodies, repo, self._clock)

    def configure(self, settings: Settings | None = None, clock: Clock | None = None) -> None:
        """Replace the settings or clock and forget what was built (local runs and tests)."""
        with self._lock:
            self._settings = settings
            self._clock = clock or SystemClock()
            self._built = None
