"""AWS clients, created lazily once per container and injected where they are used."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import botocore.handlers
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.hooks import EventAliaser, HierarchicalEmitter

from chalicelib.dynamo_client import CALLS as LEAN_SERVICES
from chalicelib.dynamo_client import LeanDynamoDB, wants_lean
from chalicelib.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_s3 import S3Client

BACKGROUND_READ_TIMEOUT_S = 60.0  # stream polling, exports: no client is waiting
# Store calls a process makes besides those of the requests it serves, each one at a time:
# the local server's stream pumps, scheduler, exports and the gauges' threads (the push
# workers are counted from their setting).
BACKGROUND_CALLS = 32
# A Lambda container serves one request at a time; a schedule's push workers or gauge
# threads make a few calls at once: botocore's own default pool covers them.
LAMBDA_POOL_CONNECTIONS = 10


@dataclass(frozen=True)
class StoreConcurrency:
    """What follows from how many requests a process serves at once."""

    requests: int  # requests served at once: the local server's connection cap, 1 on Lambda
    pool_connections: int  # connections each store client keeps (boto3 and PynamoDB)
    bulkhead_calls: int  # store calls to one cluster at once (0: no bulkhead)


def store_concurrency(settings: Settings) -> StoreConcurrency:
    """The one sizing rule (docs/configuration.md, "Concurrency"). Each request is served
    by one thread that makes one store call at a time, so a store client whose pool holds a
    connection for every request served at once, plus the background work's, never opens a
    connection it must throw away; and a bulkhead of that size refuses no load the server
    admitted, only a store whose calls pile up because they are slow or failing (and then
    the breaker refuses first). DMQ_BULKHEAD_MAX_CALLS, when set, is the bulkhead instead."""
    if settings.on_lambda:
        requests = 1
        pool = max(LAMBDA_POOL_CONNECTIONS, requests + settings.push_workers)
    else:
        requests = settings.http_max_connections
        pool = requests + settings.push_workers + BACKGROUND_CALLS
    chosen = settings.guard.bulkhead_max_calls
    return StoreConcurrency(requests, pool, pool if chosen is None else chosen)


def store_config(settings: Settings, background: bool = False) -> Config:
    """The botocore config of DMQ's clients: the settings' store budget, and a connection
    pool sized by `store_concurrency`; background work (the local stream pump, table
    exports) waits longer for a busy store instead."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": settings.store_attempts},
        connect_timeout=settings.store_connect_timeout_s,
        read_timeout=read_timeout_s(settings, background),
        max_pool_connections=store_concurrency(settings).pool_connections,
    )


def read_timeout_s(settings: Settings, background: bool = False) -> float:
    """How long one store call waits for its answer: the store budget's read timeout, or
    the longer background one."""
    if background:
        return max(settings.store_read_timeout_s, BACKGROUND_READ_TIMEOUT_S)
    return settings.store_read_timeout_s


DUMMY_CREDENTIALS = ("dmq", "dmq")

# botocore's service models, endpoints and defaults, parsed once per process: every
# session gets this loader, so a new client costs no JSON parsing (a fresh session's own
# loader would read about a megabyte of models again, some 100 ms of CPU per client).
_LOADER = botocore.loaders.create_loader()


# botocore's built-in event handlers, registered once per process: a new session
# registers about 130 of them, checking each one's signature (some 10 ms of CPU a
# session); each session DMQ makes starts from a copy of this registry instead, as
# botocore gives each client a copy of its session's: (how many built-ins there were,
# their registry).
_BUILTINS: tuple[int, HierarchicalEmitter] | None = None
_BUILTINS_LOCK = threading.Lock()


def _builtin_events() -> HierarchicalEmitter:
    """A copy of the registry of botocore's built-in handlers, registered again when the
    built-in list has grown since (a library may add to it on import, as moto does)."""
    global _BUILTINS
    count = len(botocore.handlers.BUILTIN_HANDLERS)
    with _BUILTINS_LOCK:
        if _BUILTINS is None or _BUILTINS[0] != count:
            registry = HierarchicalEmitter()
            events = EventAliaser(registry)
            for spec in botocore.handlers.BUILTIN_HANDLERS:  # as Session registers them
                if len(spec) == 2:
                    events.register(spec[0], spec[1])
                elif spec[2] is botocore.handlers.REGISTER_FIRST:
                    events.register_first(spec[0], spec[1])
                elif spec[2] is botocore.handlers.REGISTER_LAST:
                    events.register_last(spec[0], spec[1])
            _BUILTINS = (count, registry)
        return copy.copy(_BUILTINS[1])


def new_botocore_session() -> botocore.session.Session:
    """A botocore session of its own (sessions are not shared across threads) on the
    process's one model loader and a copy of its one registry of built-in handlers."""
    core = botocore.session.Session(event_hooks=_builtin_events(),
                                    include_builtin_handlers=False)
    core.register_component("data_loader", _LOADER)
    return core


def new_session() -> boto3.session.Session:
    """A boto3 session of its own on the process's one model loader."""
    return boto3.session.Session(botocore_session=new_botocore_session())


class Clients:
    """Lazily built boto3 clients for one region and its endpoints, within the
    settings' store budget (or the longer background one)."""

    def __init__(self, settings: Settings, region: str | None = None,
                 background: bool = False) -> None:
        self._settings = settings
        self.region = region or settings.region
        self._config = store_config(settings, background)
        self._background = background
        self._lock = threading.Lock()
        self._cache: dict[str, Any] = {}
        self._store_credentials: tuple[tuple[str, str] | None] | None = None

    def store_credentials(self) -> tuple[str, str] | None:
        """The DynamoDB endpoint's credentials: the configured ones; dummy ones for an
        endpoint when the usual chain finds none (local stores accept any); else None,
        the usual chain."""
        if self._store_credentials is None:
            self._store_credentials = (self._pick_credentials(self._settings.dynamodb_endpoint),)
        return self._store_credentials[0]

    def _pick_credentials(self, endpoint: str | None) -> tuple[str, str] | None:
        if self._settings.store_credentials is not None:
            return self._settings.store_credentials
        if endpoint and new_session().get_credentials() is None:
            return DUMMY_CREDENTIALS
        return None

    def _client(self, service: str, endpoint: str | None,
                credentials: tuple[str, str] | None = None, name: str | None = None) -> Any:
        """The cached client of a service (`name`: a second one of it, such as a
        cluster's own DynamoDB client)."""
        name = name or service
        with self._lock:
            if name not in self._cache:
                key, secret = credentials or (None, None)
                session = new_session()
                client = session.client(
                    service,  # type: ignore[call-overload]
                    region_name=self.region,
                    endpoint_url=endpoint,
                    config=self._config,
                    aws_access_key_id=key,
                    aws_secret_access_key=secret,
                )
                if service in LEAN_SERVICES and wants_lean(endpoint, self._settings.store_client):
                    client = self._lean(client, str(endpoint), session, credentials)
                self._cache[name] = client
            return self._cache[name]

    def _lean(self, client: Any, endpoint: str, session: boto3.session.Session,
              credentials: tuple[str, str] | None) -> LeanDynamoDB:
        """The DynamoDB (or Streams) client whose item calls skip botocore's machinery,
        with the same budget and pool size (chalicelib/dynamo_client.py)."""
        signing = (Credentials(*credentials) if credentials is not None
                   else session.get_credentials())
        settings = self._settings
        return LeanDynamoDB(client, endpoint, signing, settings.store_connect_timeout_s,
                            read_timeout_s(settings, self._background),
                            store_concurrency(settings).pool_connections)

    def lean_wrapper(self) -> Callable[[Any], Any] | None:
        """What makes a DynamoDB client built elsewhere (PynamoDB's, for the queue
        records) the lean one, with this store's credentials and budget; None where the
        lean client does not apply (AWS itself, TLS, or DMQ_STORE_CLIENT=botocore)."""
        endpoint = self._settings.dynamodb_endpoint
        if not wants_lean(endpoint, self._settings.store_client):
            return None
        session, credentials = new_session(), self.store_credentials()
        return lambda client: self._lean(client, str(endpoint), session, credentials)

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client."""
        return self._client("dynamodb", self._settings.dynamodb_endpoint,
                            self.store_credentials())

    @property
    def streams(self) -> DynamoDBStreamsClient:
        """The DynamoDB Streams client."""
        return self._client("dynamodbstreams", self._settings.dynamodb_endpoint,
                            self.store_credentials())

    def cluster_dynamodb(self, cluster: str) -> DynamoDBClient:
        """The DynamoDB client of a cluster's messages table: one of its own when the
        cluster has its own endpoint (DMQ_CLUSTER_ENDPOINTS), else the main client. Every
        use of a cluster's table gets its client here, so a cluster is one client to guard."""
        client: DynamoDBClient | None = self._own_client("dynamodb", cluster)
        return self.dynamodb if client is None else client

    def cluster_streams(self, cluster: str) -> DynamoDBStreamsClient:
        """The DynamoDB Streams client of a cluster's messages table (same endpoint)."""
        client: DynamoDBStreamsClient | None = self._own_client("dynamodbstreams", cluster)
        return self.streams if client is None else client

    def _own_client(self, service: str, cluster: str) -> Any:
        """A cluster's own client of a service, cached; None when it has no endpoint of
        its own. The cache is read first: picking credentials asks the provider chain."""
        endpoint = self._settings.cluster_endpoint(cluster)
        if endpoint is None:
            return None
        name = f"{service}@{cluster}"
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None:
            return cached
        return self._client(service, endpoint, self._pick_credentials(endpoint), name=name)

    def table_dynamodb(self, table: str) -> DynamoDBClient:
        """The client of a table by its name: a messages table's cluster client, else the
        main one (queues and control tables are on the main endpoint)."""
        for cluster in self._settings.clusters:
            if self._settings.cluster_table(cluster) == table:
                return self.cluster_dynamodb(cluster)
        return self.dynamodb

    def dynamodb_clients(self) -> list[DynamoDBClient]:
        """Every distinct DynamoDB client of this region: the main one, then the
        clusters' own (for hooks that must see every call: counting, fault injection)."""
        clients = [self.dynamodb]
        for cluster in self._settings.clusters:
            client = self.cluster_dynamodb(cluster)
            if all(client is not c for c in clients):
                clients.append(client)
        return clients

    @property
    def s3(self) -> S3Client:
        """The S3 client."""
        endpoint = self._settings.s3_endpoint
        return self._client("s3", endpoint, self._pick_credentials(endpoint))
