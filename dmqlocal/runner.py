"""One process: the store, the HTTP server, the stream pump and the scheduler."""

from __future__ import annotations

import logging
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from chalice import Chalice

from chalicelib.aws import Clients
from chalicelib.runtime import Runtime
from chalicelib.settings import Settings
from dmqlocal import chaos, counting, export_route, metrics_access, region_simulation
from dmqlocal.activity import Activity
from dmqlocal.dynamodb_local import DynamoDBLocal, StartCancelledError
from dmqlocal.export_increments import IncrementalExporter
from dmqlocal.exports import ExportTarget, PeriodicExporter, TableExporter
from dmqlocal.folders import LocalFolders
from dmqlocal.front_door import FrontDoor
from dmqlocal.handlers import (
    StreamBinding,
    local_schedule_bindings,
    local_stream_bindings,
)
from dmqlocal.metrics import MetricsEndpoint
from dmqlocal.pump import StreamPump
from dmqlocal.push_loop import PushLoop
from dmqlocal.region_stores import region_stores
from dmqlocal.scheduler import Scheduler
from dmqlocal.server import HttpLimits, LocalServer
from dmqlocal.stores import LocalStore, StoreKind
from dmqlocal.table_watch import RegionTables, TableWatch
from dmqlocal.write_marks import WriteMarks

logger = logging.getLogger("dmq.local")
# How long a count read waits for its region's pump to take in the stream.
COUNT_CATCH_UP_S = 1.0
# How long the streams of a store DMQ does not run itself (DMQ_DYNAMODB_ENDPOINT, a
# cluster's own endpoint) must show nothing new before its pump counts as caught up (the
# stop's last export, a full export's wait for the archive): DynamoDB Streams, and
# LocalStack's, show a change some time after it was made; DynamoDB Local and the memory
# store with it.
ENDPOINT_STREAM_SETTLE_S = 1.0


@dataclass
class LocalOptions:
    """How to run DMQ locally."""

    host: str = "127.0.0.1"
    port: int = 9324
    settings: Settings = field(default_factory=Settings.from_env)
    pump_interval_s: float = 0.2
    schedule_scale: float = 1.0
    data_dir: str | None = None  # the data folder, unless the settings name one
    store: StoreKind = StoreKind.DYNAMODB_LOCAL  # an endpoint in the settings wins
    # Called (from another thread) when the store process ends while DMQ runs.
    on_store_exit: Callable[[int], None] | None = None
    sync_every_write: bool = False  # DynamoDB Local: fsync each write, not once a second
    tls: ssl.SSLContext | None = None  # serve HTTPS with this context (dmqlocal/tls.py)
    listener: socket.socket | None = None  # bound already (preflight); else host:port
    # Polled while starting: when it turns true, start() stops and raises StartCancelledError.
    cancelled: Callable[[], bool] = field(default=lambda: False)
    # The store, already spawned (`python -m dmqlocal` starts its JVM before loading DMQ);
    # None: start() makes it.
    prepared_store: LocalStore | None = None


@dataclass
class _ClientSetup:
    """What opening a client region reuses of the start: the settings, the stream
    bindings (not the queues table's: a client region replicates nowhere), the data
    folder and the export targets."""

    settings: Settings
    bindings: list[StreamBinding]
    data_dir: Path
    targets: list[ExportTarget]


class LocalDmq:
    """Starts and stops everything `make run` runs, in one process."""

    def __init__(self, app: Chalice, runtime: Runtime, options: LocalOptions) -> None:
        self._app = app
        self._runtime = runtime
        # Bodies and the archive in folders: the runtime builds them from these, even for
        # a stop that comes before the start is done.
        runtime.local = LocalFolders()
        self.options = options
        self._store: LocalStore | None = None
        self.server: LocalServer | None = None
        self.pumps: list[StreamPump] = []
        self.scheduler: Scheduler | None = None
        self.exporter: PeriodicExporter | None = None
        self.table_watch: TableWatch | None = None
        self._watched: list[RegionTables] = []
        self._watched_clients: list[object] = []  # told of missing tables: the watch checks
        self.activity = Activity()  # requests wake the idle background loops
        self._writes = WriteMarks(self._dynamodb_clients)  # when a count read need not wait
        self.chaos: chaos.FaultInjector | None = None
        self.push_loop: PushLoop | None = None
        self._hurried = False
        self._dynamodb_local: DynamoDBLocal | None = None  # kept for reports after the stop
        self.metrics: MetricsEndpoint | None = None  # GET /metrics (dmqlocal/metrics_access.py)
        self._client_setup: _ClientSetup | None = None  # how client regions are opened

    @property
    def store_kind(self) -> StoreKind:
        """The store in use: an endpoint in the settings wins over the chosen kind."""
        if self.options.settings.dynamodb_endpoint:
            return StoreKind.ENDPOINT
        return self.options.store

    @property
    def store_description(self) -> str:
        """What the ready line says about the store."""
        return self._store.description if self._store else self.store_kind.value

    @property
    def store(self) -> LocalStore | None:
        """The running store."""
        return self._store

    def start(self) -> str:
        """Start the store, create the tables, then serve; return the endpoint URL."""
        settings, data_dir = self._start_store()
        self._runtime.configure(settings)
        bindings = local_stream_bindings(self._app, settings.queues_table,
                                         settings.all_regions)
        # Incremental exports: one more consumer of every stream the pump reads.
        increments = (IncrementalExporter(settings.data_dir, self._runtime.epoch)
                      if settings.data_dir else None)
        if increments is not None:
            bindings = [*bindings, *increments.bindings(bindings)]
        targets: list[ExportTarget] = []
        for region in settings.all_regions:
            targets += self._prepare_region(settings, region, bindings, data_dir)
            self._check_cancelled()
        self._client_setup = _ClientSetup(
            settings, [b for b in bindings if b.table != settings.queues_table],
            data_dir, targets)
        if settings.data_dir:
            self.exporter = PeriodicExporter(
                TableExporter(settings.data_dir, targets, self._archive_caught_up),
                settings.export_interval_s, increments, self._archive_caught_up)
        self.scheduler = Scheduler(
            local_schedule_bindings(self._app, settings.failover_after_s,
                                    self.options.schedule_scale, self._moves_busy,
                                    settings.autoscale.interval_s, self._autoscale_due),
            self.options.schedule_scale)
        self.server = self._make_server(settings)
        self._start_background(settings, self.scheduler)
        self._runtime.open_client_regions(self._open_client_region if settings.any_region
                                          else None)
        self._runtime.count_catch_up = self._catch_up_counts
        self._runtime.changes_followed = self._changes_followed
        self.server.start()
        return self.server.url

    def _start_store(self) -> tuple[Settings, Path]:
        """Start the store; the settings it leaves (every region of the deployment hosted
        here, and any region a client signs for unless DMQ_ANY_REGION=off) and the data
        folder."""
        data_dir = self.options.settings.data_dir or self.options.data_dir
        settings = replace(self.options.settings,
                           hosted_regions=self.options.settings.all_regions, data_dir=data_dir,
                           any_region=self.options.settings.any_region is not False)
        prepared = self.options.prepared_store
        self._store = (prepared if prepared is not None and prepared.kind is self.store_kind
                       else LocalStore(self.store_kind, Path(data_dir or ".dmq"),
                                       self.options.on_store_exit,
                                       self.options.sync_every_write, self.options.cancelled))
        try:
            settings = self._store.start(settings)
        finally:
            self._dynamodb_local = self._store.dynamodb_local
        self._check_cancelled()
        return settings, Path(data_dir or ".dmq")

    def _make_server(self, settings: Settings) -> LocalServer:
        """The HTTP server, not serving yet, with the local server's own routes installed
        (counting, chaos, region simulation, exports, metrics)."""
        counter = counting.install(self._runtime, settings.all_regions, os.environ)
        self.chaos = chaos.install(self._runtime, settings.all_regions, os.environ)
        if self.chaos is not None:
            logger.warning("%s=%s: failing that fraction of DynamoDB calls on purpose",
                           chaos.ENV, self.chaos.fraction)
        region_simulation.install(self._app, self._runtime)  # before the gateway reads routes
        export_route.install(self._app, self.exporter.export_now if self.exporter else None)
        self.metrics = metrics_access.install(self._app, self._runtime)
        return LocalServer(self._app, self.options.host, self.options.port,
                           {**counting.routes(counter), **chaos.routes(self.chaos)},
                           HttpLimits.of(settings), self.options.tls,
                           self.options.listener, settings.trusted_proxies,
                           self.activity.gate(FrontDoor(self._runtime)))

    def _start_background(self, settings: Settings, scheduler: Scheduler) -> None:
        """Start the table watch, the pumps, the scheduler, the push loop and the exports;
        requests wake the pumps and the scheduler."""
        self.table_watch = TableWatch(self._watched, self._runtime.forget_store)
        for client in [*self._watched_clients, *(c for r in settings.all_regions
                                                 for c in self._runtime.backend(r).clients
                                                 .dynamodb_clients())]:
            self.table_watch.watch(client)
        for pump in self.pumps:
            pump.start()
            self.activity.subscribe(pump.wake)
        self.table_watch.start()
        scheduler.start()
        self.activity.subscribe(scheduler.wake)
        self.push_loop = PushLoop(self._runtime, settings.all_regions)
        self.push_loop.start()
        if self.exporter is not None:
            self.exporter.start()

    def _check_cancelled(self) -> None:
        if self.options.cancelled():
            raise StartCancelledError("starting DMQ")

    def _prepare_region(self, settings: Settings, region: str, bindings: list[StreamBinding],
                        data_dir: Path) -> list[ExportTarget]:
        """Create the region's missing tables and its stream pumps (one per store: the
        main one, and each cluster's own, DMQ_CLUSTER_ENDPOINTS); its export targets."""
        clients = Clients(settings, region, background=True)
        # Checkpoints stay beside a store that keeps its data (one folder per region:
        # DynamoDB Local's stream ARNs do not name theirs); the memory store starts afresh.
        checkpoints = (None if self.store_kind is StoreKind.MEMORY
                       else data_dir / "checkpoints" / region)
        stores = region_stores(settings, region, clients)
        elsewhere = {t for store in stores[1:] for t in store.tables}
        targets: list[ExportTarget] = []
        for store in stores:
            store.create_at_start()
            self._watched.append(RegionTables(region, store.dynamodb, store.tables, store.create))
            self._watched_clients += [store.dynamodb, store.streams]
            # The main store's pump reads every bound table that is not in another store.
            mine = [b for b in bindings if (b.table in store.tables if store.endpoint
                                            else b.table not in elsewhere)]
            if mine or not store.endpoint:
                external = bool(store.endpoint) or self.store_kind is StoreKind.ENDPOINT
                self.pumps.append(StreamPump(store.dynamodb, store.streams, mine, region,
                                             self.options.pump_interval_s,
                                             self._runtime.health, checkpoint_dir=checkpoints,
                                             observer=partial(self._observed, region),
                                             settle_s=ENDPOINT_STREAM_SETTLE_S if external
                                             else 0.0))
            targets += [ExportTarget(region, table, store.dynamodb, settings.control_table,
                                     clients.dynamodb, store.streams)
                        for table in store.exported]
        return targets

    def _moves_busy(self) -> bool:
        """Whether the last move task pass of a region found a task running."""
        return any(self._moves_seen(r) for r in self.options.settings.all_regions)

    def _autoscale_due(self) -> float | None:
        """When an autoscaler's last check saw a merge falling due (epoch seconds)."""
        due = [d for r in self.options.settings.all_regions
               if (d := self._autoscale_due_in(r)) is not None]
        return min(due) / 1000 if due else None

    def _autoscale_due_in(self, region: str) -> int | None:
        try:
            autoscaler = self._runtime.services_for(region).autoscaler
        except Exception:  # noqa: BLE001 - a region marked down scales nothing here
            return None
        return autoscaler.next_due_ms if autoscaler is not None else None

    def _moves_seen(self, region: str) -> bool:
        try:
            return bool(self._runtime.services_for(region).move_tasks.running_seen)
        except Exception:  # noqa: BLE001 - a region marked down runs no task here
            return False

    def _open_client_region(self, region: str) -> None:
        """Open a region a client signed for (any region is served): its tables, stream
        pump and exports, as a configured region gets at start.
        The runtime calls it once per region, under its lock."""
        setup = self._client_setup
        if setup is None or self.scheduler is None:
            raise RuntimeError("DMQ is not serving")
        started = len(self.pumps)
        setup.targets += self._prepare_region(setup.settings, region, setup.bindings,
                                              setup.data_dir)
        for pump in self.pumps[started:]:
            pump.start()
            self.activity.subscribe(pump.wake)

    def _dynamodb_clients(self, region: str) -> list[Any]:
        return list(self._runtime.backend(region).clients.dynamodb_clients())

    def _catch_up_counts(self, region: str) -> None:
        """Let the region's counts take in what its streams hold now: a count read waits
        for one pass of its pump, at most COUNT_CATCH_UP_S, unless this server wrote
        nothing since the pump's last idle pass began (`write_marks.py`)."""
        written_at = self._writes.last_write(region)
        for pump in list(self.pumps):
            if pump.region == region:
                pump.catch_up(COUNT_CATCH_UP_S, written_at)

    def _observed(self, region: str, records: Sequence[dict[str, Any]]) -> None:
        """Stream records as the pump reads them: wake the long polls they concern."""
        self._runtime.services_for(region).messages.observed_records(records)

    def _changes_followed(self, region: str) -> bool:
        """Whether every stream of the region is read up to a few seconds ago."""
        pumps = [p for p in list(self.pumps) if p.region == region]
        return bool(pumps) and all(p.following() for p in pumps)

    def _archive_caught_up(self, since: float, timeout_s: float) -> bool:
        return all(p.wait_caught_up(since, timeout_s) for p in self.pumps)

    def skip_export(self) -> None:
        """Abandon the table export under way, and make a stop skip writing the pending
        incremental export (a second Ctrl-C while stopping): it stays spooled for the
        next start."""
        if self.exporter is not None:
            self.exporter.cancel()

    def export_now(self) -> None:
        """Write the pending incremental exports and a full export now (what the timers
        do; a stop writes only the incremental ones)."""
        if self.exporter is not None:
            self.exporter.export_now()

    @property
    def auth_mode(self) -> str:
        """open or required (DMQ_AUTH)."""
        return self.options.settings.auth

    def store_report(self) -> str:
        """Where DynamoDB Local keeps its database and log, and what it printed last."""
        process = self._dynamodb_local
        if process is None:
            return ""
        tail = process.output_tail(6).replace("\n", " | ") or "(nothing)"
        return (f"Its database is in {process.db_path} and its log in {process.log_file}; "
                f"its last output: {tail}.")

    def kill_store(self) -> None:
        """Kill the store's process now (a forced stop): SIGKILL loses nothing DynamoDB
        Local acknowledged; the in-memory store keeps nothing anyway."""
        if self._dynamodb_local is not None:
            self._dynamodb_local.stop(at_once=True)
        if self._store is not None and self._store.memory is not None:
            self._store.memory.stop(at_once=True)

    def hurry(self) -> None:
        """Make a stop under way skip its slow parts (a second Ctrl-C or SIGTERM)."""
        self._hurried = True
        self.skip_export()

    def stop(self, store_alive: bool = True) -> None:
        """Stop serving; write the last export while the pumps still archive; stop the
        pumps and the scheduler; flush the usage counts; then stop the store.
        With the store gone, nothing is exported."""
        if self.server is not None:
            self.server.stop()
        self._runtime.client_regions.close()  # waits for an opening under way
        if self.exporter is not None:
            self.exporter.stop(final_export=store_alive)
            self.exporter = None
        for part in (self.push_loop, *self.pumps, self.scheduler, self.table_watch):
            if part is not None:
                part.stop()
        meter = self._runtime.meter()
        if meter is not None:
            meter.flush()
        if self._store is not None:
            self._store.stop(at_once=self._hurried)
            self._store = None
        self._runtime.configure(None)
