"""How many queues each account has in a region: one counter item per account in the
control table (`queuecount#<account>`, a number `n`), so that the queue quota costs one
conditional update, whatever the number of queues.

The counter changes in the same transaction as the queue record it counts (a created
queue adds one, a deleted one takes one away), so that the two never disagree. A counter
that does not exist yet (an account whose queues were made before counting began) is
started once from the account index.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.models import Model

from chalicelib.domain.queues import ConnectionBudget

PREFIX = "queuecount#"


class QueueQuotaReachedError(Exception):
    """The account has as many queues as its quota allows."""


class CountModel(Model):
    """One account's queue counter. Subclasses bind the table name."""

    class Meta:
        abstract = True

    key = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(default=0)


def key_of(account: str) -> str:
    """The control-table key of an account's queue counter."""
    return f"{PREFIX}{account}"


def _options(region: str, host: str | None, credentials: tuple[str, str] | None,
             budget: ConnectionBudget) -> dict[str, Any]:
    options: dict[str, Any] = {
        "region": region, "host": host,
        "connect_timeout_seconds": budget.connect_timeout_s,
        "read_timeout_seconds": budget.read_timeout_s,
        "max_retry_attempts": budget.attempts - 1,
        "max_pool_connections": budget.pool_connections,
    }
    if credentials is not None:
        options.update(aws_access_key_id=credentials[0], aws_secret_access_key=credentials[1])
    return options


@lru_cache(maxsize=32)
def count_model_for(table: str, region: str, host: str | None,
                    credentials: tuple[str, str] | None,
                    budget: ConnectionBudget) -> type[CountModel]:
    """A CountModel class bound to one control table, built once and cached."""
    meta = type("Meta", (), {"table_name": table,
                             **_options(region, host, credentials, budget)})
    name = f"CountModel_{abs(hash((table, region, host, credentials, budget)))}"
    return type(name, (CountModel,), {"Meta": meta, "__module__": __name__})


def connection_for(region: str, host: str | None, credentials: tuple[str, str] | None,
                   budget: ConnectionBudget) -> Connection:
    """A connection for transactions over the region's tables."""
    return Connection(**_options(region, host, credentials, budget))
