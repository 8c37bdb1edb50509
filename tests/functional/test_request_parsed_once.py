"""GIVEN a queue WHEN each message action reaches DMQ (over the SQS JSON protocol and the
Query protocol, through the real front door, with plain or structured logs) THEN its
QueueUrl is parsed once, by the protocol adapter, and the queue's record is looked up
once: no layer below parses the URL again or looks the queue up again, and the log lines
are named from that parse."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.config import Config
from chalice.test import Client

from chalicelib import observability
from chalicelib.domain import queue_urls
from chalicelib.metadata.repository import QueueRepository
from tests.conftest import sqs_client

Call = Callable[[Any, str], Any]
FORM = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Host": "dmq.test"}


@pytest.fixture(params=["plain logs", "structured logs"])
def counted(request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often a QueueUrl was parsed and a queue record was looked up, with plain logs
    (locally) and with structured logs and metrics (as on Lambda, where each request's
    log lines name its action, account and queue)."""
    structured = request.param == "structured logs"
    observability.configure(json_logs=structured, emit_metrics=structured)
    request.addfinalizer(lambda: observability.configure(json_logs=False, emit_metrics=False))
    seen: Counter[str] = Counter()
    parse, get = queue_urls.parse_queue_url, QueueRepository.get

    def counting_parse(url: str) -> Any:
        seen["parse"] += 1
        return parse(url)

    def counting_get(self: QueueRepository, queue_id: str, fresh: bool = False) -> Any:
        seen["lookup"] += 1
        return get(self, queue_id, fresh)

    monkeypatch.setattr(queue_urls, "parse_queue_url", counting_parse)
    monkeypatch.setattr(QueueRepository, "get", counting_get)
    yield seen


def _handles(sqs: Any, url: str, count: int) -> list[str]:
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(n), "MessageBody": f"m{n}"} for n in range(count)])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, VisibilityTimeout=60)
    return [m["ReceiptHandle"] for m in got["Messages"]]


ACTIONS: dict[str, Call] = {
    "SendMessage": lambda sqs, url: sqs.send_message(QueueUrl=url, MessageBody="one"),
    "SendMessageBatch": lambda sqs, url: sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(n), "MessageBody": f"b{n}"} for n in range(10)]),
    "ReceiveMessage": lambda sqs, url: sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]),
    "DeleteMessage": lambda sqs, url: sqs.delete_message(
        QueueUrl=url, ReceiptHandle=_handles(sqs, url, 1)[0]),
    "DeleteMessageBatch": lambda sqs, url: sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(_handles(sqs, url, 3))]),
    "ChangeMessageVisibility": lambda sqs, url: sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=_handles(sqs, url, 1)[0], VisibilityTimeout=5),
    "ChangeMessageVisibilityBatch": lambda sqs, url: sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "ReceiptHandle": h, "VisibilityTimeout": 5}
                               for n, h in enumerate(_handles(sqs, url, 3))]),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_message_action_parses_its_queue_url_once_and_looks_the_queue_up_once(
    dmq: Client, counted: Counter[str], action: str,
) -> None:
    # GIVEN a queue and the action's set-up done
    sqs = sqs_client(dmq, "us-east-1", Config(retries={"total_max_attempts": 1}))
    url = sqs.create_queue(QueueName="once")["QueueUrl"]
    before: list[Counter[str]] = []
    sqs.meta.events.register(f"before-call.sqs.{action}",
                             lambda **kwargs: before.append(Counter(counted)))
    # WHEN the action is called (over the JSON protocol)
    ACTIONS[action](sqs, url)
    # THEN that one request parsed its QueueUrl once and looked the queue up once
    assert counted["parse"] - before[-1]["parse"] == 1, (counted, before[-1])
    assert counted["lookup"] - before[-1]["lookup"] == 1, (counted, before[-1])


@pytest.mark.parametrize("action", ["SendMessage", "ReceiveMessage", "DeleteMessage"])
def test_so_does_a_query_protocol_request(
    dmq: Client, sqs: Any, counted: Counter[str], action: str,
) -> None:
    # GIVEN a queue (and a message's receipt handle, to delete)
    url = sqs.create_queue(QueueName="once-query")["QueueUrl"]
    params = {"SendMessage": {"MessageBody": "form"}, "ReceiveMessage": {},
              "DeleteMessage": {}}[action]
    if action == "DeleteMessage":
        params["ReceiptHandle"] = _handles(sqs, url, 1)[0]
    before = Counter(counted)
    # WHEN the action comes as a Query protocol form
    response = dmq.http.post("/", headers=FORM, body=urlencode(
        {"Action": action, "Version": "2012-11-05", "QueueUrl": url, **params}))
    # THEN it was served, having parsed its QueueUrl once and looked the queue up once
    assert response.status_code == 200, response.body
    assert counted["parse"] - before["parse"] == 1, (counted, before)
    assert counted["lookup"] - before["lookup"] == 1, (counted, before)
