"""The in-memory store's process and HTTP front: it answers any DynamoDB client, answers
bad requests in DynamoDB's error shape (never a dropped connection), and stops promptly
on SIGTERM or when its parent's end of its standard input closes."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from dmqlocal.memstore.engine import Engine
from dmqlocal.memstore.process import MemoryStoreProcess
from dmqlocal.memstore.server import StoreServer


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    store = MemoryStoreProcess()
    yield store.start()
    store.stop()


def _client(endpoint: str, service: str = "dynamodb", region: str = "us-east-1") -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=region,
                        aws_access_key_id="k", aws_secret_access_key="s")


def test_botocore_reaches_it_and_each_key_and_region_has_its_own_tables(
        endpoint: str) -> None:
    # GIVEN a table made through botocore in one region
    east, west = _client(endpoint), _client(endpoint, region="eu-west-1")
    east.create_table(TableName="t-region", BillingMode="PAY_PER_REQUEST",
                      KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                      AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
    east.put_item(TableName="t-region", Item={"k": {"S": "a"}, "n": {"N": "1.50"}})
    # THEN it answers there, with numbers in DynamoDB's canonical form, and not elsewhere
    assert east.get_item(TableName="t-region", Key={"k": {"S": "a"}})["Item"]["n"] == \
        {"N": "1.5"}
    assert "t-region" not in west.list_tables()["TableNames"]
    # AND a failed condition comes back as DynamoDB's error, with the item when asked
    with pytest.raises(ClientError) as failed:
        east.put_item(TableName="t-region", Item={"k": {"S": "a"}},
                      ConditionExpression="attribute_not_exists(k)",
                      ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert failed.value.response["Item"]["n"] == {"N": "1.5"}


def test_bad_requests_get_an_answer_in_the_error_shape(endpoint: str) -> None:
    host, port = endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    cases = [({"X-Amz-Target": "DynamoDB_20120810.ListTables"}, b"{not json",
              "SerializationException"),
             ({"X-Amz-Target": "Nothing.ListTables"}, b"{}", "UnknownOperationException"),
             ({"X-Amz-Target": "DynamoDB_20120810.Frobnicate"}, b"{}",
              "UnknownOperationException"),
             ({"X-Amz-Target": "DynamoDB_20120810.ListTables"}, b"[1, 2]",
              "SerializationException")]
    for headers, body, code in cases:
        connection.request("POST", "/", body=body, headers=headers)
        answer = connection.getresponse()
        payload = json.loads(answer.read())
        assert answer.status == 400
        assert payload["__type"].endswith("#" + code), payload
    connection.close()


def test_an_unexpected_failure_is_a_500_in_the_error_shape() -> None:
    # GIVEN an engine whose call breaks
    engine = Engine()

    def broken(*args: Any) -> Any:
        raise KeyError("surprise")

    engine.call = broken  # type: ignore[method-assign]
    server = StoreServer(engine)
    answer = server.answer({"x-amz-target": "DynamoDB_20120810.ListTables"}, b"{}")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 500")
    assert json.loads(body)["__type"].endswith("#InternalServerError")


def test_sigterm_stops_it_at_once() -> None:
    store = MemoryStoreProcess()
    store.start()
    pid = store.pid
    assert pid is not None
    started = time.monotonic()
    store.stop()
    assert time.monotonic() - started < 1.5
    assert store.pid is None


def test_it_stops_when_its_parent_closes_its_input() -> None:
    # GIVEN the store's process, started as the local server starts it
    process = subprocess.Popen([sys.executable, "-m", "dmqlocal.memstore",
                                "--until-stdin-closes"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdin is not None
        assert process.stdout.readline().startswith(b"listening on ")
        # WHEN its input closes (the parent is gone)
        process.stdin.close()
        # THEN it ends by itself, cleanly
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
