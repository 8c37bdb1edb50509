"""GIVEN a DynamoDB client that leaves parts of batches unprocessed, or cancels a
transaction WHEN the store access layer writes, reads or transacts THEN unprocessed parts
are sent again (alone, after a jittered pause that grows) a bounded number of times,
batches are cut at DynamoDB's limits, and what stays unprocessed is either handed back
or raised as a throttle, as the caller chose; a cancellation carries its reasons."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.domain.exceptions import StoreThrottledError, TransactionCancelledError
from chalicelib.dynamo_batches import (
    Retry,
    get_all,
    get_some,
    transact_write,
    write_all,
    write_some,
)
from chalicelib.dynamo_errors import lost_race

TABLE = "t"


class FakeClient:
    """Answers batch calls, leaving the last `leave` entries of each of the first
    `unprocessed_calls` calls unprocessed; records what each call was given."""

    def __init__(self, unprocessed_calls: int = 0, leave: int = 1,
                 items: dict[str, dict[str, Any]] | None = None) -> None:
        self.unprocessed_calls = unprocessed_calls
        self.leave = leave
        self.items = items or {}
        self.writes: list[list[dict[str, Any]]] = []
        self.reads: list[dict[str, Any]] = []
        self.transactions: list[list[dict[str, Any]]] = []
        self.cancel_with: list[dict[str, Any]] | None = None

    def _split(self, entries: list[Any]) -> tuple[list[Any], list[Any]]:
        calls = len(self.writes) + len(self.reads)
        if calls <= self.unprocessed_calls and entries:
            cut = max(0, len(entries) - self.leave)
            return entries[:cut], entries[cut:]
        return entries, []

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        chunk = list(RequestItems[TABLE])
        self.writes.append(chunk)
        _, left = self._split(chunk)
        return {"UnprocessedItems": {TABLE: left} if left else {}}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        request = dict(RequestItems[TABLE])
        self.reads.append(request)
        done, left = self._split(list(request["Keys"]))
        found = [self.items[k["key"]["S"]] for k in done if k["key"]["S"] in self.items]
        unprocessed = {TABLE: {**request, "Keys": left}} if left else {}
        return {"Responses": {TABLE: found}, "UnprocessedKeys": unprocessed}

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:
        self.transactions.append(list(TransactItems))
        if self.cancel_with is not None:
            raise ClientError({"Error": {"Code": "TransactionCanceledException",
                                         "Message": "cancelled"},
                               "CancellationReasons": self.cancel_with}, "TransactWriteItems")
        return {}


class Pauses:
    """A Retry whose pauses are recorded instead of slept, with the jitter at its top."""

    def __init__(self, attempts: int = 5) -> None:
        self.slept: list[float] = []
        self.retry = Retry(attempts=attempts, first_pause_s=0.01, max_pause_s=0.05,
                           sleep=self.slept.append, jitter=lambda low, high: high)


def _puts(n: int) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"key": {"S": f"k{i}"}}}} for i in range(n)]


def _keys(n: int) -> list[dict[str, Any]]:
    return [{"key": {"S": f"k{i}"}} for i in range(n)]


def test_unprocessed_writes_are_sent_again_alone_until_done_with_growing_pauses() -> None:
    client, pauses = FakeClient(unprocessed_calls=3, leave=2), Pauses()
    assert write_some(client, TABLE, _puts(5), pauses.retry) == []  # type: ignore[arg-type]
    assert [len(c) for c in client.writes] == [5, 2, 2, 2]
    assert client.writes[1] == _puts(5)[3:]
    assert pauses.slept == [0.01, 0.02, 0.04]


def test_pauses_are_capped_and_jittered_between_half_and_all_of_their_ceiling() -> None:
    drawn: list[tuple[float, float]] = []
    retry = Retry(attempts=6, first_pause_s=0.01, max_pause_s=0.03, sleep=lambda s: None,
                  jitter=lambda low, high: drawn.append((low, high)) or low)
    write_some(FakeClient(unprocessed_calls=9), TABLE, _puts(2), retry)  # type: ignore[arg-type]
    assert drawn == [(0.005, 0.01), (0.01, 0.02), (0.015, 0.03), (0.015, 0.03), (0.015, 0.03)]


def test_attempts_are_bounded_and_what_stays_unprocessed_is_handed_back() -> None:
    client, pauses = FakeClient(unprocessed_calls=100, leave=1), Pauses(attempts=3)
    left = write_some(client, TABLE, _puts(4), pauses.retry)  # type: ignore[arg-type]
    assert left == _puts(4)[3:]
    assert len(client.writes) == 3 and len(pauses.slept) == 2


def test_write_all_raises_a_throttle_when_writes_stay_unprocessed() -> None:
    client, pauses = FakeClient(unprocessed_calls=100), Pauses(attempts=2)
    with pytest.raises(StoreThrottledError, match="1 of 3 writes"):
        write_all(client, TABLE, _puts(3), pauses.retry)  # type: ignore[arg-type]
    assert len(client.writes) == 2


def test_writes_go_in_chunks_of_25_and_a_clean_batch_is_one_request() -> None:
    client = FakeClient()
    write_all(client, TABLE, _puts(60))  # type: ignore[arg-type]
    assert [len(c) for c in client.writes] == [25, 25, 10]
    assert [r for c in client.writes for r in c] == _puts(60)


def test_reads_go_in_chunks_of_100_and_retry_unprocessed_keys() -> None:
    items = {f"k{i}": {"key": {"S": f"k{i}"}, "n": {"N": str(i)}} for i in range(250)}
    client, pauses = FakeClient(unprocessed_calls=1, leave=7, items=items), Pauses()
    found = get_all(client, TABLE, _keys(250), retry=pauses.retry)  # type: ignore[arg-type]
    assert sorted(int(i["n"]["N"]) for i in found) == list(range(250))
    assert [len(r["Keys"]) for r in client.reads] == [100, 7, 100, 50]
    assert all(r["ConsistentRead"] is True for r in client.reads)
    assert pauses.slept == [0.01]


def test_a_read_passes_its_projection_and_consistency() -> None:
    client = FakeClient(items={"k0": {"key": {"S": "k0"}}})
    get_all(client, TABLE, _keys(1), consistent=False, projection="#k",  # type: ignore[arg-type]
            names={"#k": "key"})
    assert client.reads == [{"Keys": _keys(1), "ConsistentRead": False,
                             "ProjectionExpression": "#k",
                             "ExpressionAttributeNames": {"#k": "key"}}]


def test_get_some_hands_back_keys_left_unprocessed_and_get_all_raises() -> None:
    items = {f"k{i}": {"key": {"S": f"k{i}"}} for i in range(3)}
    client, pauses = FakeClient(unprocessed_calls=100, items=items), Pauses(attempts=2)
    found, left = get_some(client, TABLE, _keys(3), retry=pauses.retry)  # type: ignore[arg-type]
    assert found == [items["k0"], items["k1"]] and left == _keys(3)[2:]
    with pytest.raises(StoreThrottledError, match="1 of 3 reads"):
        get_all(FakeClient(unprocessed_calls=100, items=items), TABLE, _keys(3),  # type: ignore[arg-type]
                retry=pauses.retry)


def test_a_cancelled_transaction_is_mapped_with_its_reasons() -> None:
    client = FakeClient()
    client.cancel_with = [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}]
    ops = [{"Put": {"TableName": TABLE, "Item": {}}}, {"Delete": {"TableName": TABLE,
                                                                  "Key": {}}}]
    with pytest.raises(TransactionCancelledError) as caught:
        transact_write(client, ops)  # type: ignore[arg-type]
    assert caught.value.reasons == client.cancel_with
    assert lost_race(caught.value)
    assert client.transactions == [ops]


def test_a_transaction_that_lands_is_one_request() -> None:
    client = FakeClient()
    transact_write(client, [{"Put": {"TableName": TABLE, "Item": {}}}])  # type: ignore[arg-type]
    assert len(client.transactions) == 1
