"""GIVEN the botocore sessions DMQ makes WHEN a session or a client is made THEN it starts
from the process's one registry of botocore's built-in handlers (a copy: what one session
registers stays its own) and its one model loader; a built-in added later (as moto adds
one on import) reaches the sessions made after it; and each PynamoDB connection of a queue
repository builds its client once, on such a session, so that no connection parses
botocore's endpoints and models again."""

from __future__ import annotations

from typing import Any

import botocore.handlers
import botocore.session
import pytest

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


def _fired(session: botocore.session.Session, event: str) -> list[Any]:
    return [r for _, r in session.get_component("event_emitter").emit(event, value=1) if r]


def _handlers(session: botocore.session.Session, event: str) -> list[str]:
    """The handlers of an event, by name (a session initializer, such as Powertools',
    registers a function of its own for each session)."""
    found = session.get_component("event_emitter")._emitter._handlers.prefix_search(event)
    return [getattr(h, "__qualname__", None) or repr(h) for h in found]


def test_a_session_has_botocores_builtin_handlers() -> None:
    ours, theirs = aws.new_botocore_session(), botocore.session.Session()
    events = sorted({spec[0] for spec in botocore.handlers.BUILTIN_HANDLERS if "*" not in spec[0]})
    assert len(events) > 50
    for event in events:
        found = _handlers(ours, event)
        assert found and found == _handlers(theirs, event), event


def test_what_one_session_registers_stays_its_own() -> None:
    first, second = aws.new_botocore_session(), aws.new_botocore_session()
    first.register("dmq-test-event", lambda value, **_: ("first", value))
    assert _fired(first, "dmq-test-event") == [("first", 1)]
    assert _fired(second, "dmq-test-event") == []
    assert _fired(aws.new_botocore_session(), "dmq-test-event") == []


def test_a_builtin_added_later_reaches_later_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    before = aws.new_botocore_session()
    added = list(botocore.handlers.BUILTIN_HANDLERS)
    added.append(("dmq-test-builtin", lambda value, **_: ("builtin", value)))
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", added)
    assert _fired(aws.new_botocore_session(), "dmq-test-builtin") == [("builtin", 1)]
    assert _fired(before, "dmq-test-builtin") == []
