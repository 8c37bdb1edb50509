"""The stores one region's tables live in, as the local server provisions, watches, pumps
and exports them.

The main store (DMQ_DYNAMODB_ENDPOINT, or the local server's own DynamoDB Local) holds
the queues and control tables and every cluster's messages table, except those of
clusters with an endpoint of their own (DMQ_CLUSTER_ENDPOINTS): each of those is a store
of its own, holding that one table. A table is created, checked and read (its stream
included) through its own store's clients only; a store never holds another's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.aws import Clients
from chalicelib.domain.queues import DEFAULT_CLUSTER
from chalicelib.settings import Settings
from infra import provision

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient


class ClusterStoreError(RuntimeError):
    """A cluster's own store cannot be reached or refuses its table."""


@dataclass(frozen=True)
class RegionStore:
    """One store of a region: its clients, the tables it holds, those exported (every
    table but the control table), and how to create the missing ones."""

    name: str  # "main", or the cluster whose own store it is
    endpoint: str | None  # a cluster's own endpoint; None for the main store
    dynamodb: DynamoDBClient
    streams: DynamoDBStreamsClient
    tables: tuple[str, ...]
    exported: tuple[str, ...]
    create: Callable[[], None]

    def create_at_start(self) -> None:
        """Create the missing tables; a cluster's own store that fails is named (its
        endpoint comes from DMQ_CLUSTER_ENDPOINTS), not left as botocore's bare error."""
        try:
            self.create()
        except (BotoCoreError, ClientError) as exc:
            if self.endpoint is None:
                raise
            raise ClusterStoreError(
                f"the store of cluster {self.name} at {self.endpoint} (DMQ_CLUSTER_ENDPOINTS) "
                f"could not create its table: {exc}") from exc


def region_stores(settings: Settings, region: str, clients: Clients) -> list[RegionStore]:
    """The main store of a region, then each cluster's own store."""
    own = [c for c in settings.clusters if settings.cluster_endpoint(c)]
    shared = [settings.cluster_table(c) for c in settings.clusters if c not in own]

    def create_main() -> None:
        provision.create_all(
            clients.dynamodb, None if settings.bodies_dir else clients.s3,
            {"QueuesTableName": settings.queues_table,
             "MessagesTableName": settings.messages_table,
             "BodiesBucketName": settings.bodies_bucket,
             "ControlTableName": settings.control_table},
            region=region,
        )
        provision.create_cluster_tables(
            clients.dynamodb, [t for t in shared if t != settings.cluster_table(DEFAULT_CLUSTER)])

    stores = [RegionStore("main", None, clients.dynamodb, clients.streams,
                          (settings.queues_table, settings.control_table, *shared),
                          (settings.queues_table, *shared), create_main)]
    for cluster in own:
        table = settings.cluster_table(cluster)
        dynamodb = clients.cluster_dynamodb(cluster)
        stores.append(RegionStore(
            cluster, settings.cluster_endpoint(cluster), dynamodb,
            clients.cluster_streams(cluster), (table,), (table,),
            _creator(dynamodb, table)))
    return stores


def _creator(dynamodb: DynamoDBClient, table: str) -> Callable[[], None]:
    """Creates a cluster's table in its own store, unless it is there."""

    def create() -> None:
        provision.create_cluster_tables(dynamodb, [table])

    return create
