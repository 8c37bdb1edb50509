"""The storage boundary hands callers typed store errors, never a botocore error to unpick."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from chalicelib.domain.exceptions import (
    ConditionFailedError,
    StoreError,
    StoreThrottledError,
    StoreUnavailableError,
    TransactionCancelledError,
)
from chalicelib.dynamo_errors import translate_errors


def _raised(exc: Exception) -> StoreError:
    with pytest.raises(StoreError) as caught, translate_errors():
        raise exc
    assert caught.value.__cause__ is exc
    return caught.value


def _client_error(code: str, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, **extra}, "PutItem")


def test_a_failed_condition_carries_the_item_as_it_stood() -> None:
    item = {"pk": {"S": "q#0"}, "visible_at": {"N": "5"}}
    error = _raised(_client_error("ConditionalCheckFailedException", Item=item))
    assert isinstance(error, ConditionFailedError)
    assert error.item == item


def test_a_failed_condition_without_return_values_has_no_item() -> None:
    error = _raised(_client_error("ConditionalCheckFailedException"))
    assert isinstance(error, ConditionFailedError)
    assert error.item is None


def test_a_cancelled_transaction_carries_its_reasons_in_order() -> None:
    reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": {"a": {"S": "b"}}}]
    error = _raised(_client_error("TransactionCanceledException", CancellationReasons=reasons))
    assert isinstance(error, TransactionCancelledError)
    assert error.reasons == reasons


def test_a_cancellation_without_reasons_is_a_plain_store_error() -> None:
    error = _raised(_client_error("TransactionCanceledException"))
    assert type(error) is StoreError


@pytest.mark.parametrize(
    "code",
    ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"],
)
def test_throttles_are_throttle_errors(code: str) -> None:
    assert type(_raised(_client_error(code))) is StoreThrottledError


def test_other_faults() -> None:
    assert type(_raised(_client_error("InternalServerError"))) is StoreError
    unreachable = _raised(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert type(unreachable) is StoreUnavailableError
