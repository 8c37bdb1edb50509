"""GIVEN the real local server holding 30,000 messages (written straight into DynamoDB
Local: 25 to 45 s on two cores), some of them in flight (a stop that scanned the tables
took 5.6 s at 20,000 and 19 s at 50,000)
WHEN it gets one SIGTERM
THEN it exits within 5 s (the stop writes only the pending incremental export, it scans
no table), and a restart on the same data folder has every message, the in-flight ones
still in flight under their receipt handles.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bench.servers import wait_idle
from bench.stop_time import fill, store_client, store_endpoint
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, STOPPED, DmqProcess, launch

MESSAGES = 30_000
SENT_OVER_HTTP = 100
IN_FLIGHT = 20
STOP_LIMIT_S = 5.0

pytestmark = pytest.mark.e2e


def _sqs(url: str) -> Any:
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                        aws_access_key_id="stop-key", aws_secret_access_key="stop-secret",
                        config=Config(read_timeout=30, retries={"mode": "standard",
                                                                "max_attempts": 5}))


def _started(data: Path) -> DmqProcess:
    dmq = launch(DMQ_DATA_DIR=str(data))
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    return dmq


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return (int(found["ApproximateNumberOfMessages"]),
            int(found["ApproximateNumberOfMessagesNotVisible"]))


def _store(dmq: DmqProcess, data: Path, sqs: Any) -> tuple[str, list[dict[str, Any]]]:
    """The queue filled, some messages sent over HTTP and some received (in flight)."""
    url = sqs.create_queue(QueueName="stop-time")["QueueUrl"]
    queue_id = "/".join(url.rsplit("/", 2)[-2:])
    fill(store_client(store_endpoint(dmq.process.pid), data), queue_id,
         MESSAGES - SENT_OVER_HTTP)
    for start in range(0, SENT_OVER_HTTP, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"sent {start + i}"} for i in range(10)])
        assert not result.get("Failed"), result
    return url, _receive(sqs, url, IN_FLIGHT)


def _receive(sqs: Any, url: str, wanted: int) -> list[dict[str, Any]]:
    """At least `wanted` messages received (invisible for 15 minutes), in a few calls."""
    received: list[dict[str, Any]] = []
    for _ in range(20):
        received += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                        VisibilityTimeout=900).get("Messages", [])
        if len(received) >= wanted:
            return received
    raise AssertionError(f"only {len(received)} of {wanted} messages received")


def _sigterm(dmq: DmqProcess) -> float:
    """One SIGTERM; the seconds until the process exited (killed after the e2e bound)."""
    started = time.monotonic()
    dmq.process.send_signal(signal.SIGTERM)
    try:
        code = dmq.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        dmq.stop(1)
        pytest.fail(f"DMQ did not exit within {STOP_TIMEOUT_S} s of SIGTERM:\n{dmq.output}")
    elapsed = time.monotonic() - started
    dmq.stop(5)  # joins the output reader
    assert code == 0, dmq.output
    assert STOPPED in dmq.output, dmq.output
    return elapsed


def test_one_sigterm_stops_a_full_store_fast_and_keeps_everything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _started(data)
    try:
        sqs = _sqs(first.url)
        url, in_flight = _store(first, data, sqs)
        wait_idle(first.process.pid, quiet_share=0.3, timeout_s=120)  # the pump is done
        # The items written straight into the store are counted from its stream: once
        # the pump has read it, the counts are exact.
        assert _counts(sqs, url) == (MESSAGES - len(in_flight), len(in_flight))
        # WHEN one SIGTERM arrives
        elapsed = _sigterm(first)
    finally:
        first.stop(STOP_TIMEOUT_S)
    # THEN it exited in time; the last changes are in incremental exports
    assert elapsed < STOP_LIMIT_S, f"the stop took {elapsed:.1f} s:\n{first.output}"
    kinds = {json.loads(p.read_text()).get("exportType")
             for p in (data / "exports").rglob("manifest-summary.json")}
    assert "INCREMENTAL_EXPORT" in kinds, kinds
    second = _started(data)
    try:
        sqs = _sqs(second.url)
        # AND a restart has every message, the in-flight ones still in flight
        assert _counts(sqs, url) == (MESSAGES - len(in_flight), len(in_flight))
        sample = _receive(sqs, url, 10)
        assert not {m["MessageId"] for m in in_flight} & {m["MessageId"] for m in sample}
        # AND their receipt handles still hold them: releasing one makes it receivable
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=in_flight[0]["ReceiptHandle"],
                                      VisibilityTimeout=0)
        held = len(in_flight) + len(sample) - 1
        assert _counts(sqs, url) == (MESSAGES - held, held)
    finally:
        second.stop(STOP_TIMEOUT_S)
