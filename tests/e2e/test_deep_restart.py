"""GIVEN the real local server over a DynamoDB Local behind the counting proxy
(bench/store_proxy.py), holding 3,000 messages in one queue (written straight into the
store, counted in by the server's stream pump), ten of them in flight
WHEN it is stopped and started again on the same data folder
THEN the start, its first answers and its first background passes make no store request
whose cost grows with the messages held: no DescribeTable and no Scan of the messages
table (DynamoDB Local sums every item for a DescribeTable: 0.8 s at 218,000 messages,
and a restart over 500,000 took 22 s), and only a few items read from it; and every
message is still there, the in-flight ones still in flight.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bench.stop_time import fill
from bench.store_proxy import CountingProxy, StoreCall
from chalicelib.settings import Settings
from dmqlocal.dynamodb_local import DynamoDBLocal
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

MESSAGES = 3_000
IN_FLIGHT = 10
COUNT_TIMEOUT_S = 120.0
AFTER_START_S = 3.0  # the pump's first passes and the exports' first check come in this
MOST_ITEMS_READ = 100  # from the messages table, in the whole window
# The server's store credentials: DynamoDB Local keeps a database per key id, and takes
# only letters and digits in one.
KEY = "deeprestart"

pytestmark = pytest.mark.e2e


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[CountingProxy, str]]:
    """A DynamoDB Local keeping its data under tmp_path, behind the counting proxy; the
    proxy and the store's own endpoint."""
    store = DynamoDBLocal(tmp_path / "store")
    store.start()
    counting = CountingProxy(store.endpoint).start()
    try:
        yield counting, store.endpoint
    finally:
        counting.stop()
        store.stop()


def _sqs(url: str) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="deep-key", aws_secret_access_key="deep-secret",
                        config=Config(read_timeout=30, retries={"mode": "standard",
                                                                "max_attempts": 5}))


def _started(data: Path, endpoint: str) -> DmqProcess:
    dmq = launch(DMQ_DATA_DIR=str(data), DMQ_DYNAMODB_ENDPOINT=endpoint,
                 AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=KEY)
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    return dmq


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return (int(found["ApproximateNumberOfMessages"]),
            int(found["ApproximateNumberOfMessagesNotVisible"]))


def _receive(sqs: Any, url: str, wanted: int) -> set[str]:
    received: set[str] = set()
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, wanted),
                                  VisibilityTimeout=900).get("Messages", [])
        received |= {m["MessageId"] for m in got}
        if len(received) >= wanted:
            break
    return received


def _load(dmq: DmqProcess, store_endpoint: str) -> tuple[str, set[str]]:
    """The queue filled and counted, and the ids of the messages put in flight."""
    sqs = _sqs(dmq.url)
    url = sqs.create_queue(QueueName="deep")["QueueUrl"]
    store = boto3.client("dynamodb", endpoint_url=store_endpoint, region_name="us-east-1",
                         aws_access_key_id=KEY, aws_secret_access_key=KEY)
    fill(store, "/".join(url.rsplit("/", 2)[-2:]), MESSAGES, threads=4)
    deadline = time.monotonic() + COUNT_TIMEOUT_S
    while _counts(sqs, url) != (MESSAGES, 0) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _counts(sqs, url) == (MESSAGES, 0)
    held = _receive(sqs, url, IN_FLIGHT)
    assert len(held) == IN_FLIGHT
    return url, held


def _growing(calls: list[StoreCall], table: str) -> list[StoreCall]:
    """The calls on the messages table whose cost follows the items it holds."""
    return [c for c in calls if table in c.tables and c.operation in ("DescribeTable", "Scan")]


def test_a_restart_reads_nothing_that_grows_with_the_messages_held(
        tmp_path: Path, stored: tuple[CountingProxy, str]) -> None:
    proxy, store_endpoint = stored
    data = tmp_path / "data"
    messages_table = Settings().messages_table
    first = _started(data, proxy.endpoint)
    try:
        url, held = _load(first, store_endpoint)
    finally:
        assert first.stop(STOP_TIMEOUT_S) == 0, first.output
    since = time.monotonic()
    again = _started(data, proxy.endpoint)
    try:
        sqs = _sqs(again.url)
        sqs.list_queues()
        time.sleep(AFTER_START_S)
        calls = proxy.calls(since, time.monotonic())
        assert _counts(sqs, url) == (MESSAGES - IN_FLIGHT, IN_FLIGHT)
        sample = _receive(sqs, url, IN_FLIGHT)
    finally:
        assert again.stop(STOP_TIMEOUT_S) == 0, again.output
    assert calls, "the start made no store request through the proxy"
    assert not _growing(calls, messages_table), _growing(calls, messages_table)
    read = sum(c.items for c in calls if messages_table in c.tables
               and c.operation in ("Query", "GetItem", "BatchGetItem"))
    assert read <= MOST_ITEMS_READ, [c for c in calls if messages_table in c.tables]
    assert len(sample) == IN_FLIGHT and not sample & held
