"""GIVEN the local server on DynamoDB Local WHEN the store freezes (SIGSTOP), or comes back
empty (its tables deleted) THEN each request meets a bounded wait and answers
ServiceUnavailable within about 5 s, long polls included, and an emptied store is
provisioned again, so later requests are served without restarting DMQ."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import app as dmq_app
from chalicelib.settings import Settings
from dmqlocal.dynamodb_local import DynamoDBLocal
from dmqlocal.runner import LocalDmq, LocalOptions
from infra import provision

REGION = "us-east-1"
BOUND_S = 6.5  # the default store budget (about 5 s) and the request's own work
LONG_POLL_S = 5  # the frozen store's long poll waits this long
CLIENT = Config(connect_timeout=2, read_timeout=15, retries={"total_max_attempts": 1})


@pytest.fixture(scope="module")
def store() -> Iterator[DynamoDBLocal]:
    """A DynamoDB Local of this module's own: the tests freeze it."""
    server = DynamoDBLocal(None)
    server.start()
    yield server
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture
def key() -> str:
    """Credentials of this test's own: DynamoDB Local keeps a database per access key."""
    return f"sick{uuid.uuid4().hex[:8]}"


@pytest.fixture
def dmq(store: DynamoDBLocal, key: str, tmp_path: Path) -> Iterator[str]:
    settings = Settings(dynamodb_endpoint=store.endpoint, store_credentials=(key, key),
                        long_poll_interval_ms=500)
    local = LocalDmq(dmq_app.app, dmq_app.runtime,
                     LocalOptions(port=0, settings=settings, data_dir=str(tmp_path)))
    url = local.start()
    yield url
    if store.pid is not None:
        os.kill(store.pid, signal.SIGCONT)
    local.stop()


def _sqs(url: str) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name=REGION, aws_access_key_id="k",
                        aws_secret_access_key="s", config=CLIENT)


def _timed_error(name: str, call: Callable[[], Any]) -> tuple[str, float]:
    started = time.monotonic()
    try:
        answer = call()
    except ClientError as error:
        return str(error.response["Error"]["Code"]), time.monotonic() - started
    took = time.monotonic() - started
    pytest.fail(f"{name} on a frozen store answered after {took:.1f} s: {answer!r}")


def _until(call: Callable[[], Any], timeout_s: float) -> tuple[Any, float]:
    started = time.monotonic()
    while True:
        try:
            return call(), time.monotonic() - started
        except ClientError:
            if time.monotonic() - started > timeout_s:
                raise
            time.sleep(0.2)


def _frozen(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until every thread of `pid` is stopped. SIGSTOP takes effect thread by thread:
    on a loaded machine a request sent at once was once still answered, in 0.0 s."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue
        if states and all(state in ("T", "t") for state in states):
            return
        assert time.monotonic() < deadline, f"the store's threads did not stop: {states}"
        time.sleep(0.01)


def test_a_frozen_store_gets_bounded_waits(store: DynamoDBLocal, dmq: str) -> None:
    sqs = _sqs(dmq)
    url = sqs.create_queue(QueueName="frozen")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    assert store.pid is not None
    os.kill(store.pid, signal.SIGSTOP)
    try:
        _frozen(store.pid)
        calls = {
            "SendMessage": lambda: sqs.send_message(QueueUrl=url, MessageBody="during"),
            "ReceiveMessage (long poll)": lambda: sqs.receive_message(
                QueueUrl=url, WaitTimeSeconds=LONG_POLL_S, VisibilityTimeout=0),
            "GetQueueUrl (metadata)": lambda: sqs.get_queue_url(QueueName="unknown"),
            "ListQueues": lambda: sqs.list_queues(),
        }
        for name, call in calls.items():
            code, took = _timed_error(name, call)
            print(f"\n{name} on a frozen store: {code} after {took:.1f} s")
            assert (code, name) == ("ServiceUnavailable", name)
            # a long poll tries the store again within its wait (a slow store may be
            # only busy), so it answers by the end of its wait and one more store budget
            bound = BOUND_S + (LONG_POLL_S if "long poll" in name else 0)
            assert took < bound, (name, took)
    finally:
        os.kill(store.pid, signal.SIGCONT)
    # THEN the store back, requests are served again
    _until(lambda: sqs.send_message(QueueUrl=url, MessageBody="after"), 15)
    bodies: set[str] = set()
    for _ in range(20):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            bodies.add(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if {"before", "after"} <= bodies:
            break
    assert {"before", "after"} <= bodies


def test_a_store_that_comes_back_empty_is_provisioned_again(
    store: DynamoDBLocal, dmq: str, key: str,
) -> None:
    sqs = _sqs(dmq)
    sqs.create_queue(QueueName="lost")
    dynamodb = boto3.client("dynamodb", endpoint_url=store.endpoint, region_name=REGION,
                            aws_access_key_id=key, aws_secret_access_key=key)
    epoch = dmq_app.runtime.epoch(REGION)
    # WHEN the store loses every table (as a restart over a wiped data folder would)
    for table in dynamodb.list_tables()["TableNames"]:
        dynamodb.delete_table(TableName=table)
    # THEN DMQ provisions them again within a bounded time, without a restart
    created, took = _until(lambda: sqs.create_queue(QueueName="found"), 20)
    url = created["QueueUrl"]
    # (the queues table can be back a moment before the others: a send in that moment is a
    # 503, which the SDKs retry, so "served again" is a queue made and a message sent)
    _, sending = _until(lambda: sqs.send_message(QueueUrl=url, MessageBody="hello"), 20)
    took += sending
    print(f"\nserved again {took:.1f} s after the tables were deleted")
    assert took < 15
    got: list[dict[str, Any]] = []
    for _ in range(5):
        got += sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2).get("Messages", [])
        if got:
            break
    assert [m["Body"] for m in got] == ["hello"]
    assert sqs.list_queues()["QueueUrls"] == [url]  # the lost queue went with the store
    # AND the new store lifetime has its own epoch, which the archive now uses
    assert dmq_app.runtime.epoch(REGION) == provision.store_epoch(dynamodb) != epoch
