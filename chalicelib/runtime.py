"""Builds the object graph once per container: clients, stores, repositories, services."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from chalicelib.aws import Clients, store_concurrency
from chalicelib.backend.archive import S3Sink, Sink, StreamArchiver
from chalicelib.backend.bodies import BodyStore
from chalicelib.backend.count_cache import CountItemCache
from chalicelib.backend.counters import ShardCounters
from chalicelib.backend.dynamo_store import DynamoMessageStore
from chalicelib.backend.guard import guard_client, state_store_for
from chalicelib.backend.wakeups import Wakeups
from chalicelib.clock import Clock, SystemClock
from chalicelib.clusters.autoscale_states import AutoscaleStates
from chalicelib.clusters.autoscaler import Autoscaler, ScaleEvent
from chalicelib.clusters.manager import ClusterManager
from chalicelib.clusters.stores import ClusterStores
from chalicelib.domain.fair_share import TURN_WAIT_S, ConcurrencyShare
from chalicelib.domain.queues import ConnectionBudget, QueueRecord
from chalicelib.domain.throttling import limit_of
from chalicelib.encryption.envelope import MessageCipher
from chalicelib.encryption.wiring import ContainerKeys
from chalicelib.fifo.dynamo import DynamoFifoStore
from chalicelib.frontend.admission import Admission
from chalicelib.frontend.context import check_signed_region
from chalicelib.frontend.services import Services
from chalicelib.metadata.control import ControlRepository
from chalicelib.metadata.move_tasks import MoveTaskRepository
from chalicelib.metadata.purges import PurgeRepository
from chalicelib.metadata.repository import KEPT_MAX_S, QueueRepository
from chalicelib.metadata.throttle_buckets import BucketStore
from chalicelib.push.delivery import PushDelivery, PushOptions
from chalicelib.push.destinations import DestinationPolicy
from chalicelib.push.registry import SubscriptionRepository
from chalicelib.push.subscriptions import SubscriptionService
from chalicelib.regions.backends import Backend
from chalicelib.regions.clients import ClientRegions, Opener
from chalicelib.regions.failover import FailoverManager
from chalicelib.regions.reachability import RegionHealth
from chalicelib.regions.replication import LagMetrics, Replicator, SyncReplicas
from chalicelib.runtime_types import LocalParts
from chalicelib.service.fairness import Fairness
from chalicelib.service.identity import Identities
from chalicelib.service.messages import MessageService
from chalicelib.service.move_tasks import MoveTaskService
from chalicelib.service.purged_counts import PurgedCounts
from chalicelib.service.purges import PurgeService
from chalicelib.service.queues import QueueService
from chalicelib.service.receipts import ReceiptCodec
from chalicelib.service.request_dedup import RequestDedup
from chalicelib.service.sign_in_limits import SignInLimits
from chalicelib.service.throttling import Throttle
from chalicelib.settings import ConfigurationError, Settings, get_settings
from chalicelib.usage.records import Listener, UsageMeter


class Runtime:
    """The container's objects, built lazily on first use."""

    def __init__(self, settings: Settings | None = None, clock: Clock | None = None) -> None:
        self._settings = settings
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._built: dict[str, tuple[Services, Backend]] = {}
        self._managers: dict[str, FailoverManager] = {}
        self.health = RegionHealth()
        self.lag = LagMetrics()
        self._meter: UsageMeter | None = None
        self._usage_listeners: list[Listener] = []
        self._sink: Sink | None = None
        self._epochs: dict[str, str] = {}
        self._identities: Identities | None = None
        self._admission: Admission | None = None
        self._push: dict[str, tuple[SubscriptionService, PushDelivery]] = {}
        self.keys = ContainerKeys(lambda: self.settings, lambda: self.local)
        self.sign_in_limits = SignInLimits()  # failed password sign-ins (console, metrics)
        self.client_regions = ClientRegions()  # regions opened for clients (local server)
        # Waits until a region's counts took in its stream (the local server's pump);
        # None where nothing in process reads the streams (Lambda).
        self.count_catch_up: Callable[[str], None] | None = None
        # Whether a region's messages streams are read up to now by a reader in process
        # that hands their records to the region's MessageService (the local server's
        # pumps); None where there is none (Lambda).
        self.changes_followed: Callable[[str], bool] | None = None
        # The folders of the local runtime (bodies, archive), which it hands over here.
        self.local: LocalParts | None = None

    @property
    def settings(self) -> Settings:
        """The settings in force."""
        return self._settings or get_settings()

    def region_of(self, region: str) -> str:
        """A deployment region or an opened client region; "" (or an unknown one, for
        back-end work) is the default."""
        if region in self.settings.all_regions or region in self.client_regions.opened:
            return region
        return self.settings.region

    def services_for_request(self, region: str = "") -> Services:
        """The services of the region a request is signed for ("": unsigned, the default
        region); SignatureDoesNotMatch for a region outside the deployment, unless any
        region is served (the local server), which opens it on first use."""
        settings = self.settings
        any_region = bool(settings.any_region) and self.client_regions.can_open
        check_signed_region(region, settings.all_regions, any_region)
        if region and region not in settings.all_regions:
            self.client_regions.open(region)
        return self.services_for(region)

    def open_client_regions(self, opener: Opener | None) -> None:
        """Install how a client region is opened (the local server: provision its
        tables, start its back-end work); None: no region is opened."""
        self.client_regions = ClientRegions(opener)

    def served_regions(self) -> tuple[str, ...]:
        """The regions this process runs back-end work for: its own and the client
        regions opened so far."""
        return tuple(dict.fromkeys([*self.settings.local_regions, *self.client_regions.opened]))

    def services_for(self, region: str = "") -> Services:
        """The services of a region; RegionDownError while it is marked down."""
        region = self.region_of(region)
        self.health.check(region)
        return self._get(region)[0]

    def backend(self, region: str = "") -> Backend:
        """The stores the back-end handlers of a region use."""
        return self._get(self.region_of(region))[1]

    def replicator(self) -> Replicator:
        """Applies this deployment's stream records to replica regions."""
        return Replicator(self.backend, self.health, self._clock, self.settings.queues_table,
                          self.lag)

    def archive_sink(self) -> Sink | None:
        """Where audit records go: the archive bucket, else the data folder, else nowhere.
        Built once per container (its S3 client is reused by every batch)."""
        if self._sink is not None:
            return self._sink
        with self._lock:
            if self._sink is None:
                settings = self.settings
                if settings.archive_bucket:
                    self._sink = S3Sink(Clients(settings).s3, settings.archive_bucket)
                elif settings.data_dir:
                    self._sink = self._local_parts("DMQ_DATA_DIR").archive(settings.data_dir)
            return self._sink

    def archiver(self) -> StreamArchiver | None:
        """Writes stream batches to the archive (None when archiving is off)."""
        sink = self.archive_sink()
        return StreamArchiver(sink, self.epoch) if sink is not None else None

    def epoch(self, region: str = "") -> str:
        """The epoch of a region's store, read once per container: a store that loses its
        data loses the process too (the memory store), or keeps its epoch."""
        region = self.region_of(region)
        known = self._epochs.get(region)
        if known is None:
            known = self.backend(region).control.epoch()
            with self._lock:
                self._epochs[region] = known
        return known

    def meter(self) -> UsageMeter | None:
        """The container's usage counters (None when archiving is off)."""
        if self._meter is not None:
            return self._meter
        sink = self.archive_sink()
        with self._lock:
            if self._meter is None and sink is not None:
                self._meter = UsageMeter(sink, self._clock, self.settings.usage_flush_s,
                                         listeners=self._usage_listeners)
            return self._meter

    def listen_to_usage(self, listener: Listener) -> None:
        """Have every request the usage meter counts (and that was not refused) passed to
        `listener` too (the console's throughput plots)."""
        with self._lock:
            self._usage_listeners.append(listener)

    def failover(self, region: str = "") -> FailoverManager:
        """The region's heartbeat, promotion and rejoin manager (kept: it remembers rejoins)."""
        region = self.region_of(region)
        known = self._managers.get(region)
        if known is not None:
            return known
        with self._lock:
            if region not in self._managers:
                self._managers[region] = FailoverManager(
                    region, self.settings, self.backend, self.health, self._clock)
            return self._managers[region]

    def receipt_key(self) -> str:
        """The key that signs this deployment's receipt handles."""
        return self.keys.receipt()

    def console_key(self) -> str:
        """The web console's form-token key, fetched once per container."""
        return self.keys.console()

    def _local_parts(self, setting: str) -> LocalParts:
        """The local runtime's folders, which a folder setting needs."""
        if self.local is None:
            raise ConfigurationError(
                f"{setting} keeps data in a folder, which only the local server provides "
                "(python -m dmqlocal); on AWS, leave it unset.")
        return self.local

    def _get(self, region: str) -> tuple[Services, Backend]:
        built = self._built.get(region)  # what is built is read without the lock (below)
        if built is not None:
            return built
        with self._lock:
            if region not in self._built:
                self._built[region] = self._build(self.settings, region)
            return self._built[region]

    def _message_stores(self, settings: Settings, clients: Clients, bodies: BodyStore,
                        counters: ShardCounters) -> dict[str, DynamoMessageStore]:
        """Each cluster's message store, its client behind the cluster's guard."""
        self._guard_clusters(settings, clients)
        return {cluster: DynamoMessageStore(clients.cluster_dynamodb(cluster),
                                            settings.cluster_table(cluster), bodies,
                                            settings.inline_body_limit, counters)
                for cluster in settings.clusters}

    def _build(self, settings: Settings, region: str) -> tuple[Services, Backend]:
        clients = Clients(settings, region)
        bodies = (self._local_parts("DMQ_BODIES_DIR").bodies(settings.bodies_dir)
                  if settings.bodies_dir else BodyStore(clients.s3, settings.bodies_bucket))
        counters = ShardCounters(clients.dynamodb, settings.control_table, clock=self._clock,
                                 cache=CountItemCache(partial(self._changes_followed, region)))
        dynamo_stores = self._message_stores(settings, clients, bodies, counters)
        stores = ClusterStores(dynamo_stores, apart=[
            c for c in settings.clusters if settings.cluster_endpoint(c)])
        repo = QueueRepository(
            settings.queues_table, region, settings.dynamodb_endpoint,
            settings.metadata_cache_seconds, clients.store_credentials(),
            ConnectionBudget(settings.store_connect_timeout_s, settings.store_read_timeout_s,
                             settings.store_attempts,
                             store_concurrency(settings).pool_connections),
            counts_table=settings.control_table, client_wrapper=clients.lean_wrapper(),
            keep_s=0.0 if settings.on_lambda else KEPT_MAX_S,
        )
        holder: list[QueueService] = []

        def queue_by_arn(arn: str) -> QueueRecord | None:
            return holder[0].by_arn(arn)

        messages = MessageService(
            stores, ReceiptCodec(self.keys.receipt()), self._clock, Wakeups(),
            queue_by_arn, settings.long_poll_interval_ms,
            SyncReplicas(self.backend, self.health, self.lag),
            Fairness(settings.fair_queues),
            {cluster: DynamoFifoStore(store) for cluster, store in dynamo_stores.items()},
            MessageCipher(self.keys.wrapper(), settings.sse_managed_key_id,
                          self._clock),
        )
        messages.catch_up_counts = partial(self._catch_up_counts, region)
        messages.follow_changes(partial(self._changes_followed, region))
        control = ControlRepository(clients.dynamodb, settings.control_table, settings.clusters,
                                    settings.cluster_capacity, settings.metadata_cache_seconds)
        clusters = ClusterManager(control)
        # A client region (not in DMQ_REGIONS) is a namespace that replicates nowhere.
        regions = settings.all_regions if region in settings.all_regions else (region,)
        queues = QueueService(repo, messages, self._clock, clusters.place, regions,
                              settings.account_max_queues,
                              round(settings.metadata_cache_seconds * 1000) + 1000)
        holder.append(queues)
        purge_records = PurgeRepository(clients.dynamodb, settings.control_table)
        messages.purged = PurgedCounts(purge_records)
        queues.purges = PurgeService(
            purge_records,
            lambda queue_id: repo.get(queue_id, fresh=True), stores,
            {cluster: DynamoFifoStore(store) for cluster, store in dynamo_stores.items()},
            self._clock)
        move_tasks = MoveTaskService(
            queues, messages, stores, MoveTaskRepository(clients.dynamodb, settings.control_table),
            self._clock)
        throttle = Throttle(
            BucketStore(clients.dynamodb, settings.control_table), self._clock,
            limit_of(settings.throttle_account_rps, settings.throttle_account_burst),
            limit_of(settings.throttle_queue_rps, settings.throttle_queue_burst))
        autoscaler = Autoscaler(queues, stores, AutoscaleStates(clients.dynamodb,
                                                                settings.control_table),
                                settings.autoscale, self._clock, self._scaled)
        services = Services(settings, region, queues, messages, clusters, move_tasks, throttle,
                            autoscaler=autoscaler)
        if settings.request_dedup:
            services = replace(services, request_dedup=RequestDedup())
        return services, Backend(region, stores, bodies, repo, control, clients, self._clock,
                                 counters)

    @staticmethod
    def _guard_clusters(settings: Settings, clients: Clients) -> None:
        """A bulkhead (as wide as the store client's pool unless DMQ_BULKHEAD_MAX_CALLS
        says otherwise) and a circuit breaker on each cluster's calls (docs/isolation.md),
        with their state shared through the control table on Lambda. On a client shared
        with the control table (a cluster without an endpoint of its own) a guard sees
        only the calls that name its cluster's table."""
        guard = settings.guard.sized(store_concurrency(settings).bulkhead_calls)
        states = state_store_for(guard, settings.on_lambda, clients.dynamodb,
                                 settings.control_table)
        for cluster in settings.clusters:
            guard_client(clients.cluster_dynamodb(cluster), cluster, guard,
                         tables=[settings.cluster_table(cluster)], state_store=states)

    def _scaled(self, event: ScaleEvent) -> None:
        """A split or merge is a usage record of the queue's account."""
        meter = self.meter()
        if meter is not None:
            action = "AutoscaleSplit" if event.kind == "split" else "AutoscaleMerge"
            meter.record(event.queue.account, event.queue.name, action, 0)

    def _catch_up_counts(self, region: str) -> None:
        if self.count_catch_up is not None:
            self.count_catch_up(region)

    def _changes_followed(self, region: str) -> bool:
        return self.changes_followed is not None and self.changes_followed(region)

    def identities(self) -> Identities:
        """Access keys and callers (docs/security.md), over the default region's control
        table; built once per container."""
        if self._identities is not None:
            return self._identities
        with self._lock:
            if self._identities is None:
                self._identities = self.keys.identities(self._clock)
            return self._identities

    def admission(self) -> Admission:
        """The front door of SQS requests (authentication, the accounts' concurrency
        shares and request rates), one per container."""
        if self._admission is not None:
            return self._admission
        with self._lock:
            if self._admission is None:
                self._admission = Admission(
                    self.identities, self._throttle_of,
                    ConcurrencyShare(self.settings.account_max_concurrency, TURN_WAIT_S,
                                     self.settings.account_max_waits))
            return self._admission

    def _throttle_of(self, region: str) -> Throttle | None:
        """The buckets of the region a request is signed for; None when that region is
        not served now (the request is then refused by the protocol, as before), or is a
        client region not opened yet (only an authenticated request opens one)."""
        if region and region not in self.settings.all_regions and (
                region not in self.client_regions.opened):
            return None
        try:
            return self.services_for_request(region).throttle
        except Exception:  # noqa: BLE001 - a bad or downed region: the action answers it
            return None

    def subscriptions(self, region: str = "") -> SubscriptionService:
        """The push subscriptions of a region (the admin API's side)."""
        return self._push_of(region)[0]

    def push(self, region: str = "") -> PushDelivery:
        """The push delivery of a region (the back end's side), kept per container."""
        return self._push_of(region)[1]

    def _push_of(self, region: str) -> tuple[SubscriptionService, PushDelivery]:
        region = self.region_of(region)
        known = self._push.get(region)
        if known is not None:
            return known
        services, backend = self._get(region)
        with self._lock:
            if region not in self._push:
                repo = SubscriptionRepository(backend.clients.dynamodb,
                                              self.settings.control_table)
                destinations = DestinationPolicy.of(self.settings.push_allowed_networks)
                delivery = PushDelivery(repo, services.queues, services.messages, self._clock,
                                        region, PushOptions(workers=self.settings.push_workers,
                                                            destinations=destinations))
                self._push[region] = (SubscriptionService(repo, self._clock, destinations,
                                                          delivery.wake), delivery)
            return self._push[region]

    def forget_store(self, region: str) -> None:
        """Forget what was built over a region's store, which came back empty: its queue
        and control caches and its epoch (the next use reads the new one)."""
        region = self.region_of(region)
        with self._lock:
            self._built.pop(region, None)
            self._epochs.pop(region, None)
            self._push.pop(region, None)

    def configure(self, settings: Settings | None = None, clock: Clock | None = None) -> None:
        """Replace the settings or clock and forget what was built (local runs and tests)."""
        with self._lock:
            self._settings = settings
            self._clock = clock or SystemClock()
            self._built = {}
            self._managers = {}
            self.count_catch_up = None
            self.changes_followed = None
            self._identities = None
            self._admission = None
            self.keys = ContainerKeys(lambda: self.settings, lambda: self.local)
            self.health = RegionHealth()
            self.lag = LagMetrics()
            self._meter = None
            self._sink = None
            self._epochs = {}
            self._push = {}
            self.sign_in_limits = SignInLimits()
            self.client_regions = ClientRegions()

    @property
    def clock(self) -> Clock:
        """The clock the services read (the web console reads it too)."""
        return self._clock
