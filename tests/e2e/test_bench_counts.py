"""GIVEN the local server WHEN the benchmark asks for its DynamoDB counts THEN it gets
numbers that grow with requests when counting is on, and an SQS-shaped 404 when it is off."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from bench.counting import RemoteCounter
from bench.sqs import entries
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, ClientFactory, launch

PATH = "/_dmq/dynamodb-calls"


def test_counts_grow_with_requests_when_counting_is_on(
    make_sqs: ClientFactory, unique_name: Callable[[str], str],
) -> None:
    dmq = launch(DMQ_COUNT_DYNAMODB="1")
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        sqs: Any = make_sqs(dmq.url)
        url = sqs.create_queue(QueueName=unique_name("counted"))["QueueUrl"]
        counter = RemoteCounter(dmq.url)
        before = counter.snapshot()

        sqs.send_message_batch(QueueUrl=url, Entries=entries(0, 10, 32))
        sqs.send_message_batch(QueueUrl=url, Entries=entries(10, 10, 32))
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        after = counter.snapshot()

        spent = after - before
        # each batch is one transaction of conditional puts (the SDK sends an invocation
        # id: docs/request-dedup.md), and so is the claim of the received messages
        assert spent.calls.get("TransactWriteItems", 0) >= 3
        assert spent.tables["dmq-messages"].get("TransactWriteItems", 0) >= 3
        assert spent.calls.get("Query", 0) >= 1
        assert spent.items_returned >= len(got) > 0
        assert all(isinstance(v, float) and v >= 0 for v in spent.seconds.values())
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0, dmq.output


def test_counts_are_not_served_when_counting_is_off(dmq_url: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(dmq_url + PATH, timeout=10)

    assert caught.value.code == 404
    body = json.loads(caught.value.read())
    assert body["__type"].startswith("com.amazonaws.sqs#")
    assert "DMQ_COUNT_DYNAMODB" in body["message"]
    assert caught.value.headers["x-amzn-query-error"].endswith(";Sender")
