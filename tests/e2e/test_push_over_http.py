"""GIVEN `make run` on its default store and a loopback HTTP endpoint subscribed to a queue
WHEN messages are sent while the server is stopped with Ctrl-C and started again over the
same data folder THEN the endpoint receives every acknowledged message (at least once) in
Lambda's SQS event shape, the subscription outlives the restart, and the queue drains."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

from dmqcli.admin_api import AdminApi
from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

CONFIG = Config(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 1})
ACCOUNT = "000000000000"
MESSAGES = 60
PER_SEND = 5
DEADLINE_S = 90.0


class Receiver(BaseHTTPRequestHandler):
    """Records each event's records; fails the first batch it gets with a 503."""

    lock = threading.Lock()
    records: list[dict[str, Any]] = []
    batches = 0

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        event = json.loads(self.rfile.read(length))
        cls = type(self)
        with cls.lock:
            cls.batches += 1
            first = cls.batches == 1
            if not first:
                cls.records.extend(event["Records"])
        self.send_response(503 if first else 200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[Receiver]]]:
    handler = type("E2eReceiver", (Receiver,), {"records": [], "batches": 0,
                                                "lock": threading.Lock()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/events", handler
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _start(data: Path) -> DmqProcess:
    # The receiver is on loopback, which push endpoints may reach only when allowed.
    dmq = launch(None, DMQ_DATA_DIR=str(data), DMQ_PUSH_ALLOWED_NETWORKS="127.0.0.0/8")
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    return dmq


def _sqs(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="any-key", aws_secret_access_key="any-secret",
                        config=CONFIG)


def _send(sqs: Any, url: str, start: int) -> list[str]:
    sent = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, start + PER_SEND)])
    return [entry["MessageId"] for entry in sent.get("Successful", [])]


def _admin(dmq: DmqProcess) -> AdminApi:
    """The admin API, signed with a key of the server's own account (an admin in the open
    local mode)."""
    return AdminApi(dmq.url, "us-east-1", Credentials("any-key", "any-secret"))


def _stop(dmq: DmqProcess) -> None:
    code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


def test_an_endpoint_gets_every_message_across_a_restart(
        tmp_path: Path, receiver: tuple[str, type[Receiver]]) -> None:
    endpoint, handler = receiver
    dmq = _start(tmp_path)
    servers = [dmq]
    try:
        sqs = _sqs(dmq)
        url = sqs.create_queue(QueueName="pushed", Attributes={"VisibilityTimeout": "2"})[
            "QueueUrl"]
        created = _admin(dmq).post(f"/admin/queues/{ACCOUNT}/pushed/subscriptions", {
            "Endpoint": endpoint, "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"]})
        acknowledged: list[str] = []
        for start in range(0, MESSAGES // 2, PER_SEND):
            acknowledged += _send(sqs, url, start)
        # Ctrl-C while messages are on their way, then the same data folder again.
        _stop(dmq)
        dmq = _start(tmp_path)
        servers.append(dmq)
        sqs = _sqs(dmq)
        listed = _admin(dmq).get(f"/admin/queues/{ACCOUNT}/pushed/subscriptions")
        assert [s["UUID"] for s in listed["subscriptions"]] == [created["UUID"]]
        for start in range(MESSAGES // 2, MESSAGES, PER_SEND):
            try:
                acknowledged += _send(sqs, url, start)
            except (BotoCoreError, ClientError):  # not acknowledged: nothing promised
                continue
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            with handler.lock:
                seen = {r["messageId"] for r in handler.records}
            if seen >= set(acknowledged):
                break
            time.sleep(0.2)
        assert set(acknowledged) <= seen, f"{len(set(acknowledged) - seen)} never delivered"
        assert len(acknowledged) == MESSAGES
        with handler.lock:
            record = handler.records[0]
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:pushed"
        assert {"ApproximateReceiveCount", "SentTimestamp"} <= set(record["attributes"])

        def drained() -> bool:
            shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
            return set(shown["Attributes"].values()) == {"0"}

        while not drained():
            assert time.monotonic() < deadline, "the queue never drained"
            time.sleep(0.2)
        gone = _admin(dmq).delete(f"/admin/queues/{ACCOUNT}/pushed/subscriptions/"
                                  f"{created['UUID']}")
        assert gone["UUID"] == created["UUID"]
    finally:
        for server in servers:
            server.stop(STOP_TIMEOUT_S)
    _stop(servers[-1])
