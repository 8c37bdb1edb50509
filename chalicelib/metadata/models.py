"""PynamoDB models of the queues table; only the repository imports this module."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pynamodb.attributes import MapAttribute, NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.connection import Connection
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from chalicelib.aws import new_botocore_session
from chalicelib.domain.queues import ConnectionBudget

ACCOUNT_INDEX = "account-index"
DEFAULT_BUDGET = ConnectionBudget()


class QueueModel(Model):
    """One queue record. Subclasses bind the table name (PynamoDB fixes it in Meta)."""

    class Meta:
        abstract = True

    queue_id = UnicodeAttribute(hash_key=True)
    account = UnicodeAttribute()
    name = UnicodeAttribute()
    region = UnicodeAttribute()
    attributes: MapAttribute[str, Any] = MapAttribute(default=dict)
    tags: MapAttribute[str, Any] = MapAttribute(default=dict)
    created_ms = NumberAttribute(default=0)
    modified_ms = NumberAttribute(default=0)
    shard_count = NumberAttribute(default=1)
    shard_map = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="ACTIVE")
    deleted_ms = NumberAttribute(default=0)
    purged_ms = NumberAttribute(default=0)
    home_region = UnicodeAttribute(null=True)
    replicas = UnicodeAttribute(null=True)
    replication_mode = UnicodeAttribute(default="async")
    epoch = NumberAttribute(default=0)
    version = VersionAttribute()
    account_index: Any  # bound per table by model_for


@lru_cache(maxsize=32)
def model_for(
    table: str, region: str, host: str | None, credentials: tuple[str, str] | None = None,
    budget: ConnectionBudget = DEFAULT_BUDGET,
) -> type[QueueModel]:
    """A QueueModel class bound to one table, built once and cached."""

    class AccountIndex(GlobalSecondaryIndex[Any]):
        class Meta:
            index_name = ACCOUNT_INDEX
            projection = AllProjection()

        account = UnicodeAttribute(hash_key=True)
        name = UnicodeAttribute(range_key=True)

    options: dict[str, Any] = {
        "table_name": table, "region": region, "host": host,
        "connect_timeout_seconds": budget.connect_timeout_s,
        "read_timeout_seconds": budget.read_timeout_s,
        "max_retry_attempts": budget.attempts - 1,  # retries after the first try
        "max_pool_connections": budget.pool_connections,
    }
    if credentials is not None:
        options.update(aws_access_key_id=credentials[0], aws_secret_access_key=credentials[1])
    meta = type("Meta", (), options)
    attrs = {"Meta": meta, "account_index": AccountIndex(), "__module__": __name__}
    name = f"QueueModel_{abs(hash((table, region, host, credentials, budget)))}"
    return type(name, (QueueModel,), attrs)


def on_shared_models(connection: Connection) -> Connection:
    """Build a PynamoDB connection's botocore client now, once, from a session on the
    process's one model loader (`chalicelib.aws`). Left to itself PynamoDB makes a
    botocore session, and so a loader, of its own for each connection, which parses
    botocore's endpoints and DynamoDB models again: tens of milliseconds of CPU, and
    hundreds of thousands of objects for the collector, on every cold start."""
    if getattr(connection, "_client", None) is None:
        session = new_botocore_session()
        if connection._aws_access_key_id and connection._aws_secret_access_key:
            session.set_credentials(connection._aws_access_key_id,
                                    connection._aws_secret_access_key,
                                    connection._aws_session_token)
        connection._local.session = session
        connection.client  # noqa: B018 (builds and keeps the client)
    return connection


def use_client(connection: Connection, wrap: Callable[[Any], Any]) -> None:
    """Hand a PynamoDB connection a client of DMQ's around its own botocore client, once
    (PynamoDB builds that client, with its budget, on first use and keeps it in
    `_client`; the model classes, and so their connections, are shared)."""
    client = connection.client
    if not getattr(client, "wraps_pynamodb", False):
        wrapped = wrap(client)
        wrapped.wraps_pynamodb = True
        connection._client = wrapped
