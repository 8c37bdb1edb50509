"""GIVEN the store budget settings WHEN DMQ builds its clients THEN every DynamoDB, S3
and metadata call is bounded by them, and the default fits a 20 s long poll inside API
Gateway's 29 s."""

from __future__ import annotations

from chalicelib.aws import Clients
from chalicelib.domain.queues import ConnectionBudget
from chalicelib.metadata.models import model_for
from chalicelib.settings import Settings

API_GATEWAY_LIMIT_S = 29.0
LONGEST_LONG_POLL_S = 20.0


def test_the_default_budget_ends_a_long_poll_before_api_gateway_does() -> None:
    assert LONGEST_LONG_POLL_S + Settings().store_budget_s < API_GATEWAY_LIMIT_S


def test_the_budget_is_read_from_the_environment() -> None:
    settings = Settings.from_env({"DMQ_STORE_CONNECT_TIMEOUT_S": "0.5",
                                  "DMQ_STORE_READ_TIMEOUT_S": "1.5", "DMQ_STORE_ATTEMPTS": "3"})
    assert (settings.store_connect_timeout_s, settings.store_read_timeout_s,
            settings.store_attempts) == (0.5, 1.5, 3)
    assert settings.store_budget_s == 3 * 2.0 + 1 + 2
    assert Settings.from_env({"DMQ_STORE_ATTEMPTS": "0"}).store_attempts == 1


def test_clients_carry_the_budget() -> None:
    settings = Settings(dynamodb_endpoint="http://127.0.0.1:9", store_credentials=("k", "s"),
                        store_connect_timeout_s=0.5, store_read_timeout_s=1.5, store_attempts=3)
    for client in (Clients(settings).dynamodb, Clients(settings).s3):
        config = client.meta.config
        assert (config.connect_timeout, config.read_timeout) == (0.5, 1.5)
        assert config.retries["total_max_attempts"] == 3
    # background work (the local stream pump, exports) waits longer for a busy store
    assert Clients(settings, background=True).dynamodb.meta.config.read_timeout == 60.0


def test_metadata_calls_carry_the_budget() -> None:
    model = model_for("budget-test", "us-east-1", "http://127.0.0.1:9", ("k", "s"),
                      ConnectionBudget(0.5, 1.5, 3))
    connection = model._get_connection().connection
    assert connection._connect_timeout_seconds == 0.5
    assert connection._read_timeout_seconds == 1.5
    assert connection._max_retry_attempts_exception == 2
