"""GIVEN the PynamoDB connections of a queue repository WHEN it is built THEN each
connection's botocore client is built once, on a session that uses the process's one
model loader, so that no connection parses botocore's endpoints and models again."""

from __future__ import annotations

from typing import Any

from chalicelib import aws
from chalicelib.domain.queues import ConnectionBudget
from chalicelib.metadata.models import model_for, on_shared_models
from chalicelib.metadata.queue_counts import connection_for


def _loader_of(connection: Any) -> Any:
    return connection._local.session.get_component("data_loader")


def test_a_connection_uses_the_process_loader_and_keeps_its_client() -> None:
    connection: Any = connection_for("us-east-1", "http://127.0.0.1:9", None,
                                     ConnectionBudget(pool_connections=33))
    on_shared_models(connection)
    assert _loader_of(connection) is aws._LOADER
    client = connection.client
    assert client.meta.config.max_pool_connections == 33
    assert on_shared_models(connection).client is client


def test_given_credentials_are_kept() -> None:
    connection: Any = connection_for("us-east-1", "http://127.0.0.1:9", ("AKIDTEST", "secret"),
                                     ConnectionBudget())
    on_shared_models(connection)
    credentials = connection.client._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key) == ("AKIDTEST", "secret")


def test_two_models_share_one_loader() -> None:
    budget = ConnectionBudget()
    first: Any = model_for("dmq-queues-a", "us-east-1", "http://127.0.0.1:9", None, budget)
    second: Any = model_for("dmq-queues-b", "eu-west-1", "http://127.0.0.1:9", None, budget)
    loaders = {id(_loader_of(on_shared_models(m._get_connection().connection)))
               for m in (first, second)}
    assert loaders == {id(aws._LOADER)}
