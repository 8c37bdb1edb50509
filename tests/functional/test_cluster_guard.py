"""GIVEN a boto3 DynamoDB client guarded as one cluster WHEN its store times out, refuses
connections or stalls (a local endpoint that accepts and never answers) THEN every call
gives its bulkhead slot back, however it ends; the breaker opens and the next calls fail
in well under 100 ms without reaching the store; a client guarded as another cluster is
unaffected; after the wait a probe closes the breaker again; and an SQS request that
meets the open breaker is a 503 ServiceUnavailable, over JSON and Query, that SDKs retry."""

from __future__ import annotations

import gc
import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from chalice.test import Client

from app import runtime
from chalicelib.aws import Clients
from chalicelib.backend.guard import (
    BreakerState,
    GuardSettings,
    InProcessStateStore,
    SharedState,
    attach_guard,
    detach_guard,
    guard_client,
    guards_of,
)
from chalicelib.domain.exceptions import ClusterUnavailableError, StoreError
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.functional.test_query_protocol import FORM, error_of
from tests.sdk_retries import retried_by_sdks

REGION = "us-east-1"
KEY = {"key": {"S": "epoch"}}
FAST_FAIL_S = 0.1
SETTINGS = GuardSettings(window_calls=4, minimum_calls=4, open_wait_ms=5000,
                         half_open_calls=2, sync_ms=0)


class StalledEndpoint:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._server.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            self.accepted.append(connection)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for connection in self.accepted:
            connection.close()
        self._server.close()


@pytest.fixture
def stalled() -> Iterator[StalledEndpoint]:
    endpoint = StalledEndpoint()
    yield endpoint
    endpoint.close()


def _client(url: str, read_timeout: float = 0.2, attempts: int = 1) -> Any:
    return boto3.client("dynamodb", endpoint_url=url, region_name=REGION,
                        aws_access_key_id="k", aws_secret_access_key="s",
                        config=Config(connect_timeout=0.5, read_timeout=read_timeout,
                                      retries={"mode": "standard",
                                               "total_max_attempts": attempts}))


def _closed_port_url() -> str:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def _timed(call: Any) -> tuple[BaseException | None, float]:
    started = time.perf_counter()
    try:
        call()
    except (BotoCoreError, StoreError) as exc:  # the caller looks at what it was
        return exc, time.perf_counter() - started
    return None, time.perf_counter() - started


# -- slots always come back ------------------------------------------------------------------
def test_read_timeouts_give_the_slot_back_once_per_call_after_botocores_retries(
        stalled: StalledEndpoint) -> None:
    client = _client(stalled.url, attempts=2)
    guard = guard_client(client, "stalled", GuardSettings(bulkhead_max_calls=1,
                                                          minimum_calls=50))
    for _ in range(3):
        with pytest.raises(ReadTimeoutError):
            client.get_item(TableName="t", Key=KEY)
        assert guard.in_use == 0
    # each call was tried twice (two connections), and counted once
    assert len(stalled.accepted) == 6
    assert guard.snapshot()["calls"] == 3
    assert guard.snapshot()["failure_rate_pct"] == 100.0


def test_refused_connections_give_the_slot_back() -> None:
    client = _client(_closed_port_url())
    guard = guard_client(client, "gone", GuardSettings(bulkhead_max_calls=1, minimum_calls=50))
    for _ in range(3):
        with pytest.raises(EndpointConnectionError):
            client.list_tables()
        assert guard.in_use == 0
    assert guard.snapshot()["failure_rate_pct"] == 100.0


@pytest.mark.parametrize("where", ["before-call", "after-call"])
def test_a_hook_that_raises_around_the_guard_does_not_keep_the_slot(
        aws: Clients, where: str) -> None:
    # GIVEN another hook that raises after the guard admitted the call (a fault injector
    # raising a lost answer at after-call, say), so the guard's own end hook never runs
    client = boto3.client("dynamodb", region_name=REGION)
    guard = guard_client(client, "a", GuardSettings(bulkhead_max_calls=1))

    def fail(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="injected")

    if where == "before-call":
        client.meta.events.register_last("before-call.dynamodb", fail)
    else:
        client.meta.events.register_first("after-call.dynamodb", fail)
    with pytest.raises(ReadTimeoutError):
        client.list_tables()
    gc.collect()
    # THEN the slot comes back once botocore lets go of the call
    assert guard.in_use == 0


# -- the breaker ------------------------------------------------------------------------------
class Faults:
    """Fails a client's requests with read timeouts while `on`, counting what was sent."""

    def __init__(self, client: Any) -> None:
        self.on = False
        self.sent = 0
        client.meta.events.register_first("before-send.dynamodb", self._send)

    def _send(self, **_: Any) -> None:
        self.sent += 1
        if self.on:
            raise ReadTimeoutError(endpoint_url="injected")


def test_the_breaker_opens_fails_fast_spares_other_clusters_and_closes_again(
        aws: Clients) -> None:
    clock = FakeClock()
    store = InProcessStateStore()
    a, b = (boto3.client("dynamodb", region_name=REGION,
                         config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
            for _ in range(2))
    guard_a = guard_client(a, "a", SETTINGS, state_store=store, clock=clock)
    guard_b = guard_client(b, "b", SETTINGS, state_store=store, clock=clock)
    faults = Faults(a)
    # WHEN cluster a's store times out on every call
    faults.on = True
    for _ in range(4):
        with pytest.raises(ReadTimeoutError):
            a.get_item(TableName="dmq-control", Key=KEY)
    assert guard_a.state is BreakerState.OPEN
    # THEN its calls fail fast, and nothing more reaches its store
    sent = faults.sent
    for _ in range(20):
        error, took = _timed(lambda: a.get_item(TableName="dmq-control", Key=KEY))
        assert isinstance(error, ClusterUnavailableError) and error.cluster == "a"
        assert took < FAST_FAIL_S
    assert faults.sent == sent
    # AND cluster b is served as before
    b.get_item(TableName="dmq-control", Key=KEY)
    assert guard_b.state is BreakerState.CLOSED
    # WHEN the wait has passed and the store is back THEN the probes close it
    faults.on = False
    clock.advance(4.9)
    assert isinstance(_timed(lambda: a.list_tables())[0], ClusterUnavailableError)
    clock.advance(0.1)
    a.list_tables()
    assert guard_a.state is BreakerState.HALF_OPEN
    a.list_tables()
    assert guard_a.state is BreakerState.CLOSED
    assert store.read("a") == SharedState(BreakerState.CLOSED, clock.now_ms(), 3,
                                          guard_a.breaker.instance)  # type: ignore[union-attr]


def test_a_failing_probe_opens_it_again(aws: Clients) -> None:
    clock = FakeClock()
    client = boto3.client("dynamodb", region_name=REGION,
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    guard = guard_client(client, "a", SETTINGS, clock=clock)
    faults = Faults(client)
    faults.on = True
    for _ in range(4):
        with pytest.raises(ReadTimeoutError):
            client.list_tables()
    clock.advance(5)
    for _ in range(2):
        with pytest.raises(ReadTimeoutError):
            client.list_tables()
    assert guard.state is BreakerState.OPEN
    assert isinstance(_timed(lambda: client.list_tables())[0], ClusterUnavailableError)


def test_client_errors_do_not_open_it(aws: Clients) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    guard = guard_client(client, "a", SETTINGS)
    for _ in range(8):
        with pytest.raises(ClientError) as missing:
            client.get_item(TableName="no-such-table", Key=KEY)
        assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert guard.state is BreakerState.CLOSED
    assert guard.snapshot()["failure_rate_pct"] == 0.0


def test_a_stalled_store_opens_it_and_then_calls_fail_fast(stalled: StalledEndpoint) -> None:
    client = _client(stalled.url)
    guard = guard_client(client, "stalled", GuardSettings(window_calls=3, minimum_calls=3))
    for _ in range(3):
        error, took = _timed(lambda: client.get_item(TableName="t", Key=KEY))
        assert isinstance(error, ReadTimeoutError) and took >= 0.2
    assert guard.state is BreakerState.OPEN
    for _ in range(10):
        error, took = _timed(lambda: client.get_item(TableName="t", Key=KEY))
        assert isinstance(error, ClusterUnavailableError)
        assert took < FAST_FAIL_S
    assert len(stalled.accepted) == 3
    assert guard.in_use == 0


# -- the bulkhead -----------------------------------------------------------------------------
def test_a_stalled_cluster_holds_no_more_threads_than_its_slots(
        stalled: StalledEndpoint) -> None:
    # GIVEN 4 slots and 6 threads calling a store that never answers
    client = _client(stalled.url, read_timeout=0.5)
    guard = guard_client(client, "stalled", GuardSettings(bulkhead_max_calls=4,
                                                          minimum_calls=50))
    start = threading.Barrier(6, timeout=5)
    outcomes: list[tuple[str, float]] = []
    lock = threading.Lock()

    def worker() -> None:
        start.wait()
        error, took = _timed(lambda: client.get_item(TableName="t", Key=KEY))
        with lock:
            outcomes.append((type(error).__name__, took))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # THEN four wait on the store and two are refused at once
    assert sorted(name for name, _ in outcomes) == (
        ["ClusterUnavailableError"] * 2 + ["ReadTimeoutError"] * 4)
    assert all(took < FAST_FAIL_S for name, took in outcomes if name != "ReadTimeoutError")
    assert len(stalled.accepted) == 4
    assert guard.in_use == 0
    assert guard.snapshot()["rejected"] == {"open": 0, "busy": 2}


def test_a_call_meets_one_guard_at_most() -> None:
    client = _client(_closed_port_url())
    guard = guard_client(client, "a")
    assert guards_of(client) == [guard]
    with pytest.raises(ValueError):
        guard_client(client, "a")
    with pytest.raises(ValueError):
        guard_client(client, "b", tables=["messages-b"])
    detach_guard(client, guard)
    assert guards_of(client) == []
    by_table = guard_client(client, "b", tables=["messages-b"])
    with pytest.raises(ValueError, match="cluster b"):
        guard_client(client, "c", tables=["messages-c", "messages-b"])
    with pytest.raises(ValueError):
        guard_client(client, "whole")
    assert guards_of(client) == [by_table]


def test_a_shared_client_guards_only_the_calls_naming_each_clusters_tables(
        aws: Clients) -> None:
    # GIVEN one client for the control table and two clusters' tables, as the main
    # endpoint's client is, with cluster a's breaker open
    client = boto3.client("dynamodb", region_name=REGION)
    for name in ("messages-a", "messages-b"):
        client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    a = guard_client(client, "a", SETTINGS, tables=["messages-a"])
    b = guard_client(client, "b", SETTINGS, tables=["messages-b"])
    for _ in range(4):
        a.admit().finish(True)
    assert a.state is BreakerState.OPEN
    item = {"pk": {"S": "1"}}
    refused: list[Any] = [
        lambda: client.put_item(TableName="messages-a", Item=item),
        lambda: client.get_item(TableName="arn:aws:dynamodb:us-east-1:123456789012:table/"
                                "messages-a", Key=item),
        lambda: client.batch_write_item(RequestItems={"messages-a": [
            {"PutRequest": {"Item": item}}]}),
        lambda: client.transact_write_items(TransactItems=[
            {"Put": {"TableName": "messages-a", "Item": item}}]),
    ]
    # THEN every call naming cluster a's table is refused at once ...
    for call in refused:
        error, took = _timed(call)
        assert isinstance(error, ClusterUnavailableError) and error.cluster == "a"
        assert took < FAST_FAIL_S
    # ... and the rest go through: cluster b's table, the control table, naming no table
    client.put_item(TableName="messages-b", Item=item)
    client.get_item(TableName="dmq-control", Key=KEY)
    client.list_tables()
    assert (a.in_use, b.in_use) == (0, 0)
    assert b.snapshot()["calls"] == 1


def test_a_streams_client_is_guarded_under_a_name_of_its_own() -> None:
    streams = boto3.client("dynamodbstreams", endpoint_url=_closed_port_url(),
                           region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s",
                           config=Config(retries={"total_max_attempts": 1}))
    guard = guard_client(streams, "a", GuardSettings(minimum_calls=2, window_calls=2))
    assert guard.breaker is not None and guard.breaker.name == "a#dynamodbstreams"
    for _ in range(2):
        with pytest.raises(EndpointConnectionError):
            streams.list_streams()
    assert isinstance(_timed(lambda: streams.list_streams())[0], ClusterUnavailableError)


# -- what an SQS client sees ------------------------------------------------------------------
def test_an_sqs_request_meets_a_retryable_503_naming_the_cluster(dmq: Client) -> None:
    sqs = sqs_client(dmq, REGION, Config(retries={"total_max_attempts": 1}))
    url = sqs.create_queue(QueueName="guarded")["QueueUrl"]
    client = runtime.backend(REGION).clients.dynamodb
    table = runtime.settings.cluster_table("default")
    # the runtime guards each cluster's table; this test puts its own guard in its place
    wired = [g for g in guards_of(client) if g.cluster == "default"]
    for each in wired:
        detach_guard(client, each)
    store = InProcessStateStore()
    guard = guard_client(client, "default", SETTINGS, state_store=store, clock=FakeClock(),
                         tables=[table])
    try:
        store.write("default", SharedState(BreakerState.OPEN, FakeClock().now_ms(), 1, "x"), 0)
        with pytest.raises(ClientError) as refused:
            sqs.send_message(QueueUrl=url, MessageBody="m")
        error = refused.value.response
        assert error["Error"]["Code"] == "ServiceUnavailable"
        assert error["Error"]["Message"] == (
            "Cluster default is unavailable at the moment; retry the request.")
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert retried_by_sdks(sqs, "SendMessage", refused.value)
        # AND over the Query protocol, the same error in SQS's XML
        result = dmq.http.post("/", headers=FORM, body=urlencode(
            {"Action": "SendMessage", "QueueUrl": url, "MessageBody": "m",
             "Version": "2012-11-05"}))
        assert result.status_code == 503
        assert error_of(ET.fromstring(result.body)) == (
            "Receiver", "ServiceUnavailable",
            "Cluster default is unavailable at the moment; retry the request.")
    finally:
        detach_guard(client, guard)
        for each in wired:
            attach_guard(client, each, [table])
