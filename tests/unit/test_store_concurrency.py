"""GIVEN how many requests a process serves at once (the local server's connection cap, or
one on Lambda) WHEN its store clients and bulkheads are sized THEN each store client's
connection pool, PynamoDB's included, holds a connection for every request served at once
plus the background work's, and each cluster's bulkhead is as wide as that pool unless
DMQ_BULKHEAD_MAX_CALLS chooses otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from chalicelib.aws import BACKGROUND_CALLS, LAMBDA_POOL_CONNECTIONS, Clients, store_concurrency
from chalicelib.backend.guard import guards_of
from chalicelib.runtime import Runtime
from chalicelib.settings import Settings
from chalicelib.settings_guard import GuardSettings


def test_the_local_server_gets_a_connection_per_request_it_serves_at_once() -> None:
    settings = Settings.from_env({"DMQ_HTTP_MAX_CONNECTIONS": "3000"})
    sized = store_concurrency(settings)
    assert sized.requests == 3000
    assert sized.pool_connections == 3000 + settings.push_workers + BACKGROUND_CALLS
    assert sized.bulkhead_calls == sized.pool_connections


def test_the_default_cap_admits_1200_long_polls_and_their_producers() -> None:
    sized = store_concurrency(Settings.from_env({}))
    assert sized.requests >= 2 * 1200
    assert sized.bulkhead_calls >= sized.requests


def test_a_lambda_container_keeps_a_small_pool() -> None:
    settings = Settings(on_lambda=True, http_max_connections=5000)
    sized = store_concurrency(settings)
    assert sized.requests == 1
    assert sized.pool_connections == max(LAMBDA_POOL_CONNECTIONS, 1 + settings.push_workers)
    assert sized.pool_connections < 20
    assert sized.bulkhead_calls == sized.pool_connections


@pytest.mark.parametrize("chosen", ["0", "16"])
def test_a_chosen_bulkhead_is_kept(chosen: str) -> None:
    sized = store_concurrency(Settings.from_env({"DMQ_BULKHEAD_MAX_CALLS": chosen}))
    assert sized.bulkhead_calls == int(chosen)
    assert sized.pool_connections > 1000


def test_the_clients_and_the_guards_are_built_to_that_size() -> None:
    settings = Settings(http_max_connections=700, dynamodb_endpoint="http://127.0.0.1:9",
                        guard=GuardSettings())
    sized = store_concurrency(settings)
    clients = Clients(settings)
    assert clients.dynamodb.meta.config.max_pool_connections == sized.pool_connections
    assert Clients(settings, background=True).dynamodb.meta.config.max_pool_connections == (
        sized.pool_connections)
    Runtime._guard_clusters(settings, clients)
    (guard,) = guards_of(clients.dynamodb)
    assert guard.bulkhead.limit == sized.bulkhead_calls == 700 + settings.push_workers + (
        BACKGROUND_CALLS)


def test_pynamodb_clients_get_the_same_pool() -> None:
    from chalicelib.domain.queues import ConnectionBudget
    from chalicelib.metadata.models import model_for
    from chalicelib.metadata.queue_counts import connection_for

    budget = ConnectionBudget(pool_connections=777)
    model: Any = model_for("dmq-queues-pool", "us-east-1", "http://127.0.0.1:9", None, budget)
    assert model.Meta.max_pool_connections == 777
    assert connection_for("us-east-1", "http://127.0.0.1:9", None,
                          budget)._max_pool_connections == 777
