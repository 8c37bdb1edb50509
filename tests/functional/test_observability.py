"""GIVEN DMQ as deployed (structured logs, EMF metrics) WHEN a request is served and a
handler ends THEN the request's log line is JSON with its id, account, queue and action,
and the invocation's metrics are one valid EMF document in the DMQ namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib import observability


@pytest.fixture
def deployed() -> Iterator[None]:
    """Structured logs and metrics on, as on Lambda; off again afterwards."""
    observability.configure(json_logs=True, emit_metrics=True)
    yield
    observability.configure(json_logs=False, emit_metrics=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every stdout line that is a JSON object."""
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def assert_valid_emf(document: dict[str, Any]) -> None:
    """The shape CloudWatch requires of an Embedded Metric Format document."""
    meta = document["_aws"]
    assert isinstance(meta["Timestamp"], int)
    for directive in meta["CloudWatchMetrics"]:
        assert directive["Namespace"] == "DMQ"
        for dimension_set in directive["Dimensions"]:
            assert all(isinstance(document[name], str) for name in dimension_set)
        for metric in directive["Metrics"]:
            assert isinstance(document[metric["Name"]], int | float | list)


@pytest.mark.usefixtures("deployed")
def test_a_request_log_line_carries_its_id_account_queue_and_action(
    sqs: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    url = sqs.create_queue(QueueName="traced")["QueueUrl"]
    capsys.readouterr()
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    lines = json_lines(capsys.readouterr().out)
    served = [line for line in lines if line.get("message") == "request served"]
    assert len(served) == 1, lines
    line = served[0]
    assert (line["action"], line["account"], line["queue"]) == (
        "SendMessage", "000000000000", "traced")
    assert line["request_id"] and line["sqs_request_id"] and line["status"] == 200
    assert line["service"] == "dmq"
    assert line["level"] == "INFO"


@pytest.mark.usefixtures("deployed")
def test_a_query_request_log_line_names_its_action_and_queue(
    sqs: Any, dmq: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    sqs.create_queue(QueueName="traced-query")
    capsys.readouterr()
    result = dmq.http.post("/000000000000/traced-query", body="Action=SendMessage&MessageBody=x",
                           headers={"Content-Type": "application/x-www-form-urlencoded",
                                    "Host": "dmq.test"})
    assert result.status_code == 200
    served = [line for line in json_lines(capsys.readouterr().out)
              if line.get("message") == "request served"]
    assert [(line["action"], line["account"], line["queue"], line["status"])
            for line in served] == [("SendMessage", "000000000000", "traced-query", 200)]


@pytest.mark.usefixtures("deployed")
def test_each_request_flushes_its_metrics_as_emf(
    sqs: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    sqs.list_queues()
    documents = [d for d in json_lines(capsys.readouterr().out) if "_aws" in d]
    assert len(documents) == 1, documents
    assert_valid_emf(documents[0])
    assert documents[0]["Requests"] in (1.0, [1.0])
    assert documents[0]["service"] == "dmq"


def test_locally_nothing_structured_is_printed(
    sqs: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    sqs.list_queues()
    assert json_lines(capsys.readouterr().out) == []


@pytest.mark.usefixtures("deployed")
def test_each_log_line_is_printed_once_as_json(sqs: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    sqs.list_queues()
    out = capsys.readouterr().out
    assert out.count("request served") == 1, out


@pytest.mark.usefixtures("deployed")
def test_a_body_nested_too_deep_is_logged_and_refused_not_a_500(
    dmq: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN structured logs on, which read the request's queue and action for every line
    body = '{"QueueName": ' + "[" * 5000 + "]" * 5000 + "}"
    # WHEN a body nested far too deep arrives
    reply = dmq.http.post("/", headers={"X-Amz-Target": "AmazonSQS.CreateQueue",
                                        "Content-Type": "application/x-amz-json-1.0"},
                          body=body.encode())
    # THEN it is the protocol's SerializationException, and still logged as served
    assert reply.status_code == 400, reply.body
    assert json.loads(reply.body)["__type"].endswith("SerializationException")
    served = [line for line in json_lines(capsys.readouterr().out)
              if line.get("message") == "request served"]
    assert [(line["action"], line["status"]) for line in served] == [("CreateQueue", 400)]
