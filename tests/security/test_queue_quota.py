"""GIVEN a per-account queue quota (DMQ_ACCOUNT_MAX_QUEUES)
WHEN an account creates queues past it
THEN CreateQueue answers SQS's OverLimit (HTTP 403, a Sender fault) in the JSON and Query
protocols, nothing is created, other accounts keep their own quota, a deleted queue frees
its place, and the count is one counter item, never a scan (queues made before counting
began are counted once, from the account index)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chalice.test import Client
from pynamodb.connection.base import Connection

from app import runtime
from chalicelib.aws import Clients
from chalicelib.settings import Settings
from tests.admin_signing import client as signed_client
from tests.clocks import FakeClock
from tests.conftest import sqs_client
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, launch

QUOTA = 3
ACCOUNT, OTHER = "000000000000", "444455556666"
NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
NO_RETRIES = Config(retries={"total_max_attempts": 1})


@pytest.fixture
def settings() -> Settings:
    """The test store, with a quota of three queues per account."""
    return Settings(long_poll_interval_ms=50, metadata_cache_seconds=0.0,
                    account_max_queues=QUOTA)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The DynamoDB operations the queue registry (PynamoDB) makes."""
    made: list[str] = []
    real = Connection._make_api_call

    def record(self: Connection, operation: str, kwargs: Any, *args: Any, **more: Any) -> Any:
        made.append(operation)
        return real(self, operation, kwargs, *args, **more)

    monkeypatch.setattr(Connection, "_make_api_call", record)
    yield made


def _counter(aws: Clients, settings: Settings, account: str = ACCOUNT) -> int | None:
    item = aws.dynamodb.get_item(TableName=settings.control_table,
                                 Key={"key": {"S": f"queuecount#{account}"}}).get("Item")
    return int(item["n"]["N"]) if item else None


def _fill(sqs: Any, count: int, prefix: str = "q") -> list[str]:
    return [sqs.create_queue(QueueName=f"{prefix}{n}")["QueueUrl"] for n in range(count)]


def test_the_quota_setting_defaults_to_a_hundred_thousand() -> None:
    # SQS sets no limit on an account's queues; the default only stops a runaway client
    assert Settings.from_env({}).account_max_queues == 100_000
    assert Settings().account_max_queues == 100_000
    assert Settings.from_env({"DMQ_ACCOUNT_MAX_QUEUES": "5"}).account_max_queues == 5
    assert Settings.from_env({"DMQ_AUTH": "open", "DMQ_ACCOUNT_MAX_QUEUES": "0"}
                             ).account_max_queues == 0


def test_creating_past_the_quota_is_over_limit_and_creates_nothing(dmq: Client) -> None:
    # GIVEN an account with as many queues as its quota
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    urls = _fill(sqs, QUOTA)
    # WHEN it creates one more
    with pytest.raises(sqs.exceptions.OverLimit) as caught:
        sqs.create_queue(QueueName="one-too-many")
    # THEN SQS's OverLimit (403, Sender) names the limit
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-query-error"] == "OverLimit;Sender"
    assert f"limit of {QUOTA} queues" in error["Error"]["Message"]
    # AND nothing was created
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="one-too-many")
    assert sorted(sqs.list_queues()["QueueUrls"]) == sorted(urls)
    # AND asking again for a queue it has is still answered with its URL
    assert sqs.create_queue(QueueName="q0")["QueueUrl"] == urls[0]


def test_the_query_protocol_gets_over_limit_in_its_shape(dmq: Client) -> None:
    _fill(sqs_client(dmq, "us-east-1", NO_RETRIES), QUOTA)
    result = dmq.http.post("/", headers={
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Host": "dmq.test"},
        body=urlencode({"Action": "CreateQueue", "Version": "2012-11-05",
                        "QueueName": "by-form"}))
    assert result.status_code == 403
    root = ET.fromstring(result.body)
    assert root.findtext(f"{NS}Error/{NS}Code") == "OverLimit"
    assert root.findtext(f"{NS}Error/{NS}Type") == "Sender"


def test_a_deleted_queue_frees_its_place_and_accounts_are_separate(
        dmq: Client, aws: Clients, settings: Settings) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    urls = _fill(sqs, QUOTA)
    sqs.delete_queue(QueueUrl=urls[1])
    assert _counter(aws, settings) == QUOTA - 1
    sqs.create_queue(QueueName="in-its-place")
    with pytest.raises(sqs.exceptions.OverLimit):
        sqs.create_queue(QueueName="still-too-many")
    # AND another account (a 12-digit key acts as that account in the open mode) has its own
    other = signed_client(dmq, OTHER, "secret")
    _fill(other, QUOTA, "theirs")
    with pytest.raises(other.exceptions.OverLimit):
        other.create_queue(QueueName="theirs-too-many")
    assert (_counter(aws, settings), _counter(aws, settings, OTHER)) == (QUOTA, QUOTA)


def test_the_count_is_one_counter_item_never_a_scan(
        dmq: Client, aws: Clients, settings: Settings, calls: list[str]) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    _fill(sqs, 1)  # the account's counter starts
    calls.clear()
    _fill(sqs, 2, "more")
    # Each create: one transaction (the record, on condition that none is there, and the
    # counter) and the move of the queue catalogue's version (one small item, never the
    # queues table); no read of the name first.
    assert calls == ["TransactWriteItems", "UpdateItem"] * 2
    assert _counter(aws, settings) == 3
    # AND asking for a queue this process has met costs one read, nothing written
    calls.clear()
    assert sqs.create_queue(QueueName="more0")["QueueUrl"].endswith("/more0")
    assert calls == ["GetItem"]
    # AND one it has not met (another process made it): the account counter's one read per
    # process, the refused transaction, and the read of the record found
    runtime.configure(settings, FakeClock())
    calls.clear()
    assert sqs.create_queue(QueueName="more1")["QueueUrl"].endswith("/more1")
    assert calls == ["GetItem", "TransactWriteItems", "GetItem"]
    assert _counter(aws, settings) == 3


def test_queues_made_before_counting_are_counted_once_from_the_index(
        dmq: Client, aws: Clients, settings: Settings, clock: FakeClock,
        calls: list[str]) -> None:
    # GIVEN queues whose account has no counter (made before the quota existed)
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    _fill(sqs, QUOTA)
    aws.dynamodb.delete_item(TableName=settings.control_table,
                             Key={"key": {"S": f"queuecount#{ACCOUNT}"}})
    runtime.configure(settings, clock)  # a new process, which knows of no counter
    calls.clear()
    # WHEN the account creates one more THEN its queues are counted, and it is refused
    with pytest.raises(sqs.exceptions.OverLimit):
        sqs.create_queue(QueueName="after-upgrade")
    assert _counter(aws, settings) == QUOTA
    assert calls.count("Query") == 1  # once, to start the counter
    calls.clear()
    with pytest.raises(sqs.exceptions.OverLimit):
        sqs.create_queue(QueueName="again")
    assert "Query" not in calls and "Scan" not in calls


@pytest.mark.parametrize("settings", [Settings(long_poll_interval_ms=50,
                                               metadata_cache_seconds=0.0,
                                               account_max_queues=0)])
def test_a_quota_of_zero_is_no_quota(dmq: Client) -> None:
    sqs = sqs_client(dmq, "us-east-1", NO_RETRIES)
    assert len(_fill(sqs, QUOTA + 2)) == QUOTA + 2


def test_the_error_body_is_the_json_protocols(dmq: Client) -> None:
    _fill(sqs_client(dmq, "us-east-1", NO_RETRIES), QUOTA)
    result = dmq.http.post("/", headers={
        "X-Amz-Target": "AmazonSQS.CreateQueue", "Host": "dmq.test",
        "Content-Type": "application/x-amz-json-1.0"}, body=json.dumps({"QueueName": "raw"}))
    assert result.status_code == 403
    assert json.loads(result.body)["__type"] == "com.amazonaws.sqs#OverLimit"


@pytest.mark.e2e
def test_creates_racing_for_the_last_places_never_pass_the_quota(tmp_path: Path) -> None:
    # GIVEN the real server on DynamoDB Local, an account allowed five queues
    dmq = launch(DMQ_DATA_DIR=str(tmp_path / "data"), DMQ_ACCOUNT_MAX_QUEUES="5")
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        sqs = boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                           aws_access_key_id="racer", aws_secret_access_key="racer",
                           config=Config(retries={"total_max_attempts": 1},
                                         max_pool_connections=12))

        def create(number: int) -> str:
            try:
                sqs.create_queue(QueueName=f"race-{number}")
                return "created"
            except ClientError as exc:
                return str(exc.response["Error"]["Code"])

        # WHEN twelve different queues are created at once
        with ThreadPoolExecutor(max_workers=12) as pool:
            outcomes = list(pool.map(create, range(12)))
        # THEN exactly five are, the others are OverLimit (none a retryable fault)
        assert sorted(outcomes) == ["OverLimit"] * 7 + ["created"] * 5, outcomes
        assert len(sqs.list_queues()["QueueUrls"]) == 5
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output
