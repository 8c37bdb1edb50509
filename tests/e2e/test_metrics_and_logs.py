"""GIVEN `python -m dmqlocal --log-format json` on DynamoDB Local WHEN known traffic is
served THEN `GET /metrics` (Prometheus text format) reports exactly that traffic per queue,
the queue's visible, in-flight and delayed messages and its oldest message's age, and
every log line the server writes is one JSON object naming its request."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import (
    CLIENT_CONFIG,
    READY,
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    STOPPED,
    DmqProcess,
    free_port,
    server_env,
)

ACCOUNT = "000000000000"
PLAIN_LINES = (READY, STOPPED)  # the two status lines the command prints for people


@pytest.fixture(scope="module")
def json_server() -> Iterator[DmqProcess]:
    """The local server on DynamoDB Local with JSON logs, for this module."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port),
         "--log-format", "json"],
        cwd=ROOT, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


@pytest.fixture(scope="module")
def sqs(json_server: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=json_server.url, region_name="us-east-1",
                        aws_access_key_id="any-key", aws_secret_access_key="any-secret",
                        config=CLIENT_CONFIG)


@pytest.fixture(scope="module")
def traffic(sqs: Any) -> dict[str, Any]:
    """Known traffic on fresh queues; what a scrape must then say about each."""
    tag = uuid.uuid4().hex[:8]
    busy, idle, work, dead = (f"metrics-{n}-{tag}" for n in ("busy", "idle", "work", "dead"))
    busy_url = sqs.create_queue(QueueName=busy)["QueueUrl"]
    idle_url = sqs.create_queue(QueueName=idle)["QueueUrl"]
    dead_url = sqs.create_queue(QueueName=dead)["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])
    work_url = sqs.create_queue(QueueName=work, Attributes={"RedrivePolicy": json.dumps({
        "deadLetterTargetArn": dead_arn["Attributes"]["QueueArn"], "maxReceiveCount": 1})})[
        "QueueUrl"]
    before_send = time.time()
    # busy: 5 sent (1 + a batch of 4, one entry of a batch of 2 failing), 1 delayed,
    # 2 received of which 1 deleted, 1 failed request
    sqs.send_message(QueueUrl=busy_url, MessageBody="first")
    after_send = time.time()
    sqs.send_message_batch(QueueUrl=busy_url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(4)])
    sqs.send_message_batch(QueueUrl=busy_url, Entries=[
        {"Id": "late", "MessageBody": "late", "DelaySeconds": 600},
        {"Id": "bad", "MessageBody": "bad\x00"}])
    got = sqs.receive_message(QueueUrl=busy_url, MaxNumberOfMessages=2)["Messages"]
    assert len(got) == 2
    sqs.delete_message(QueueUrl=busy_url, ReceiptHandle=got[0]["ReceiptHandle"])
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.receive_message(QueueUrl=busy_url, MaxNumberOfMessages=11)
    # idle: two empty receives
    sqs.receive_message(QueueUrl=idle_url)
    sqs.receive_message(QueueUrl=idle_url)
    # work: a message received once, made visible again, then moved to dead on the next read
    sqs.send_message(QueueUrl=work_url, MessageBody="poison")
    (poison,) = sqs.receive_message(QueueUrl=work_url)["Messages"]
    sqs.change_message_visibility(QueueUrl=work_url, ReceiptHandle=poison["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert sqs.receive_message(QueueUrl=work_url).get("Messages", []) == []
    time.sleep(1.5)  # the oldest message has an age to measure
    return {"busy": busy, "idle": idle, "work": work, "dead": dead,
            "before_send": before_send, "after_send": after_send}


def scrape(url: str) -> tuple[str, dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    """The content type and every sample, by name and labels."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as reply:
        content_type = reply.headers["Content-Type"]
        text = reply.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return content_type, samples


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          queue: str, region: bool = False) -> float | None:
    labels = {"account": ACCOUNT, "queue": queue, **({"region": "us-east-1"} if region else {})}
    return samples.get((name, frozenset(labels.items())))


def test_metrics_report_the_traffic_and_the_state_of_each_queue(
    json_server: DmqProcess, traffic: dict[str, Any],
) -> None:
    scraped_at = time.time()
    content_type, samples = scrape(json_server.url)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    busy, idle, work, dead = (traffic[k] for k in ("busy", "idle", "work", "dead"))
    expected = {
        ("dmq_messages_sent_total", busy): 6,
        ("dmq_messages_received_total", busy): 2,
        ("dmq_messages_deleted_total", busy): 1,
        ("dmq_errors_total", busy): 2,
        ("dmq_empty_receives_total", busy): None,
        ("dmq_empty_receives_total", idle): 2,
        ("dmq_messages_received_total", idle): None,
        ("dmq_messages_sent_total", work): 1,
        ("dmq_messages_received_total", work): 1,
        ("dmq_empty_receives_total", work): 1,
        ("dmq_dead_letter_moves_total", work): 1,
        ("dmq_dead_letter_moves_total", busy): None,
    }
    assert {key: value(samples, *key) for key in expected} == expected
    gauges = {
        ("dmq_messages_visible", busy): 3,
        ("dmq_messages_in_flight", busy): 1,
        ("dmq_messages_delayed", busy): 1,
        ("dmq_messages_visible", idle): 0,
        ("dmq_oldest_message_age_seconds", idle): 0,
        ("dmq_messages_visible", work): 0,
        ("dmq_messages_visible", dead): 1,
    }
    assert {key: value(samples, *key, region=True) for key in gauges} == gauges
    age = value(samples, "dmq_oldest_message_age_seconds", busy, region=True)
    assert age is not None
    assert scraped_at - traffic["after_send"] - 0.5 <= age <= (
        time.time() - traffic["before_send"] + 0.5)


def test_every_log_line_is_a_json_object_naming_its_request(
    json_server: DmqProcess, traffic: dict[str, Any],
) -> None:
    lines = [line for line in json_server.lines
             if line.strip() and not line.startswith(PLAIN_LINES)]
    records = [json.loads(line) for line in lines]  # every other line is JSON
    assert all(isinstance(r, dict) and r["service"] == "dmq" and r["level"] and r["timestamp"]
               for r in records)
    served = [(r["action"], r["account"], r["status"]) for r in records
              if r["message"] == "request served" and r.get("queue") == traffic["busy"]]
    assert served.count(("SendMessage", ACCOUNT, 200)) == 1
    assert served.count(("SendMessageBatch", ACCOUNT, 200)) == 2
    assert served.count(("ReceiveMessage", ACCOUNT, 400)) == 1
    ids = [r["request_id"] for r in records if r["message"] == "request served"]
    assert all(ids) and len(set(ids)) == len(ids)


@pytest.mark.parametrize(("args", "env", "said"), [
    (["--log-format", "xml"], {}, "invalid choice: 'xml'"),
    ([], {"DMQ_LOG_FORMAT": "xml"}, "DMQ_LOG_FORMAT='xml': use text or json"),
], ids=["flag", "environment"])
def test_an_unknown_log_format_is_refused_before_anything_starts(
    args: list[str], env: dict[str, str], said: str,
) -> None:
    result = subprocess.run([sys.executable, "-m", "dmqlocal", "--port", str(free_port()), *args],
                            cwd=ROOT, env={**server_env(), **env}, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert said in result.stderr
    assert READY not in result.stdout
