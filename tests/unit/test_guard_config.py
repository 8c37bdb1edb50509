"""GIVEN the DMQ_BULKHEAD_* and DMQ_BREAKER_* variables WHEN the guard settings are read THEN
unset ones keep their defaults and bad ones fail with the variable's name; GIVEN a
DynamoDB answer or exception THEN only the store's own faults count against its breaker;
GIVEN a refused call THEN the client gets a 503 ServiceUnavailable naming the cluster."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from chalicelib.backend.guard import ENV_NAMES, GuardSettings
from chalicelib.domain.exceptions import ClusterUnavailableError
from chalicelib.dynamo_errors import is_fault_answer, is_store_fault
from chalicelib.frontend.errors import to_sqs_error
from chalicelib.service.exceptions import ServiceUnavailableError


def test_the_defaults_bound_each_cluster_and_open_on_a_stall() -> None:
    s = GuardSettings.from_env({})
    assert s == GuardSettings()
    # The bulkhead's width follows the server's concurrency (tests/unit/test_store_concurrency.py).
    assert (s.bulkhead_max_calls, s.bulkhead_max_wait_ms) == (None, 0)
    assert s.sized(40).bulkhead_max_calls == 40
    assert GuardSettings(bulkhead_max_calls=8).sized(40).bulkhead_max_calls == 8
    assert (s.window_calls, s.minimum_calls, s.failure_rate_pct) == (50, 20, 50.0)
    assert s.shares_state(on_lambda=True) and not s.shares_state(on_lambda=False)


def test_every_setting_is_read_from_its_variable() -> None:
    env = dict(zip(ENV_NAMES, ["8", "20", "off", "40", "10", "25.5", "90", "500", "3000",
                               "2", "4000", "250", "control-table"], strict=True))
    s = GuardSettings.from_env(env)
    assert s == GuardSettings(
        bulkhead_max_calls=8, bulkhead_max_wait_ms=20, breaker_enabled=False, window_calls=40,
        minimum_calls=10, failure_rate_pct=25.5, slow_call_rate_pct=90, slow_call_ms=500,
        open_wait_ms=3000, half_open_calls=2, half_open_max_wait_ms=4000, sync_ms=250,
        shared_state="control-table")
    assert s.shares_state(on_lambda=False)
    assert not GuardSettings(shared_state="process").shares_state(on_lambda=True)


@pytest.mark.parametrize("name,value", [
    ("DMQ_BULKHEAD_MAX_CALLS", "many"), ("DMQ_BULKHEAD_MAX_CALLS", "-1"),
    ("DMQ_BULKHEAD_MAX_WAIT_MS", "5000"), ("DMQ_BREAKER_ENABLED", "perhaps"),
    ("DMQ_BREAKER_WINDOW_CALLS", "0"), ("DMQ_BREAKER_FAILURE_RATE_PCT", "0"),
    ("DMQ_BREAKER_SLOW_CALL_RATE_PCT", "101"), ("DMQ_BREAKER_HALF_OPEN_MAX_WAIT_MS", "0"),
    ("DMQ_BREAKER_STATE", "redis"),
])
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        GuardSettings.from_env({name: value})


def test_the_minimum_never_exceeds_the_window() -> None:
    assert GuardSettings(window_calls=10, minimum_calls=20).effective_minimum_calls == 10


def _answer(code: str, reasons: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"Error": {"Code": code, "Message": "m"}}
    if reasons is not None:
        answer["CancellationReasons"] = reasons
    return answer


@pytest.mark.parametrize("status,answer,fault", [
    (200, {}, False),
    (500, _answer("InternalServerError"), True),
    (503, _answer("ServiceUnavailable"), True),
    (400, _answer("ProvisionedThroughputExceededException"), True),
    (400, _answer("ThrottlingException"), True),
    (400, _answer("RequestLimitExceeded"), True),
    (400, _answer("TransactionCanceledException", [{"Code": "None"},
                                                   {"Code": "ThrottlingError"}]), True),
    (400, _answer("TransactionCanceledException", [{"Code": "ConditionalCheckFailed"}]), False),
    (400, _answer("ConditionalCheckFailedException"), False),
    (400, _answer("ValidationException"), False),
    (400, _answer("ResourceNotFoundException"), False),
])
def test_only_the_stores_own_faults_count(status: int, answer: dict[str, Any],
                                          fault: bool) -> None:
    assert is_fault_answer(status, answer) is fault


def test_timeouts_and_connection_failures_are_faults_and_nothing_else() -> None:
    assert is_store_fault(ReadTimeoutError(endpoint_url="http://x"))
    assert is_store_fault(ConnectTimeoutError(endpoint_url="http://x"))
    assert is_store_fault(EndpointConnectionError(endpoint_url="http://x"))
    assert not is_store_fault(NoCredentialsError())
    assert not is_store_fault(ValueError("a bug"))
    throttled = {**_answer("ThrottlingException"), "ResponseMetadata": {"HTTPStatusCode": 400}}
    assert is_store_fault(ClientError(throttled, "PutItem"))  # type: ignore[arg-type]
    failed = {**_answer("ConditionalCheckFailedException"),
              "ResponseMetadata": {"HTTPStatusCode": 400}}
    assert not is_store_fault(ClientError(failed, "PutItem"))  # type: ignore[arg-type]


def test_a_refused_call_is_a_retryable_503_naming_the_cluster() -> None:
    error = to_sqs_error(ClusterUnavailableError("blue", "circuit open"))
    assert isinstance(error, ServiceUnavailableError)
    assert (error.code, error.status, error.sender_fault) == ("ServiceUnavailable", 503, False)
    assert error.message == "Cluster blue is unavailable at the moment; retry the request."
    assert "circuit" not in error.message
