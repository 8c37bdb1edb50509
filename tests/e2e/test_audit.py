"""GIVEN the real local server, driven over HTTP by boto3 through a thousand messages
while DynamoDB throttles, consumers crash before deleting and the archive handler fails
WHEN the audit runs over what the server archived and exported
THEN it reports every message and none lost, judging every copy though the stop scanned
no table (the incremental exports carry the last changes); latencies are never negative;
and a planted loss (an item removed from the table directly, its REMOVE record dropped
from the archive) is found exactly.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import app as dmq_app
from chalicelib.backend.archive import Sink
from chalicelib.backend.items import key
from chalicelib.settings import Settings
from dmqlocal import audit
from dmqlocal.folders import DirectorySink
from dmqlocal.runner import LocalDmq, LocalOptions
from tests.e2e.conftest import LOCALSTACK

MESSAGES = 1_000
LEFT_IN_QUEUE = 50
CRASH_RATE = 0.1  # received, never deleted: redelivered after the visibility timeout
THROTTLE_RATE = 0.01  # DynamoDB calls of the server that fail as throttled
ARCHIVE_FAILURE_RATE = 0.3  # archive writes that fail once (the batch is retried)
RUN_TIMEOUT_S = 240.0
SUMMARY = "messages={n} lost={lost} duplicates=0 fifo_violations=0"


class FlakySink:
    """Fails some archive writes the first time, as S3 sometimes does."""

    def __init__(self, inner: Sink, rng: random.Random) -> None:
        self._inner = inner
        self._rng = rng
        self._failed: set[str] = set()
        self.failures = 0

    def put(self, key: str, data: bytes) -> None:
        if key.startswith("archive/") and key not in self._failed \
                and self._rng.random() < ARCHIVE_FAILURE_RATE:
            self._failed.add(key)
            self.failures += 1
            raise OSError("injected archive write failure")
        self._inner.put(key, data)


@dataclass
class Run:
    data: Path
    sent: set[str]
    planted: str
    throttled: int
    archive_failures: int


def _throttle(rng: random.Random, counter: list[int]) -> Any:
    def before_call(**kwargs: Any) -> None:
        if rng.random() < THROTTLE_RATE:
            counter[0] += 1
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                         "Message": "injected"}}, "Injected")

    return before_call


def _client(endpoint: str) -> Any:
    return boto3.client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(retries={"mode": "standard", "max_attempts": 10}, read_timeout=30))


def _traffic(sqs: Any, url: str, rng: random.Random, deadline: float) -> set[str]:
    """Send MESSAGES in batches while consuming: receive and delete all but LEFT_IN_QUEUE,
    with consumers that crash before deleting (their messages come back)."""
    sent: set[str] = set()
    deleted: set[str] = set()

    def consume() -> None:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        room = MESSAGES - LEFT_IN_QUEUE - len(deleted)
        keep = [m for m in messages if rng.random() >= CRASH_RATE][:room]
        if keep:
            result = sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(keep)])
            assert not result.get("Failed"), result
            deleted.update(m["MessageId"] for m in keep)

    for start in range(0, MESSAGES, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"order {start + i} " + "x" * rng.randint(0, 2000)}
            for i in range(10)])
        assert not result.get("Failed"), result
        sent.update(m["MessageId"] for m in result["Successful"])
        consume()
    while len(deleted) < MESSAGES - LEFT_IN_QUEUE:
        assert time.monotonic() < deadline, f"only {len(deleted)} deleted in time"
        consume()
    return sent


@pytest.fixture(scope="module")
def audited_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """One faulty run of the local server; its data folder after a clean shutdown."""
    data = tmp_path_factory.mktemp("dmq-data")
    rng = random.Random(7)
    # Its own DynamoDB Local, or LocalStack's DynamoDB under `make test-localstack`.
    settings = replace(Settings.from_env(), dynamodb_endpoint=LOCALSTACK or None,
                       s3_endpoint=None,
                       regions=(), data_dir=str(data), export_interval_s=5.0)
    local = LocalDmq(dmq_app.app, dmq_app.runtime,
                     LocalOptions(port=0, settings=settings, pump_interval_s=0.05))
    sink = FlakySink(DirectorySink(data), rng)
    throttled = [0]
    original = dmq_app.runtime.archive_sink
    dmq_app.runtime.archive_sink = lambda: sink  # type: ignore[method-assign]
    try:
        endpoint = local.start()
        store = dmq_app.runtime.backend().stores.of("default")
        throttle = _throttle(rng, throttled)
        store._db.meta.events.register("before-call.dynamodb", throttle)
        sqs = _client(endpoint)
        url = sqs.create_queue(QueueName="audited", Attributes={"VisibilityTimeout": "1"})[
            "QueueUrl"]
        sent = _traffic(sqs, url, rng, time.monotonic() + RUN_TIMEOUT_S)
        store._db.meta.events.unregister("before-call.dynamodb", throttle)
        # The planted loss: one message still in the queue, removed behind DMQ's back.
        planted = sqs.receive_message(QueueUrl=url, VisibilityTimeout=300)["Messages"][0]
        queue_id = "/".join(url.rsplit("/", 2)[-2:])
        found = [s for s in range(8) if "Item" in store._db.get_item(
            TableName=store.table, Key=key(queue_id, s, planted["MessageId"]))]
        store._db.delete_item(TableName=store.table,
                              Key=key(queue_id, found[0], planted["MessageId"]))
        time.sleep(1.0)  # past the audit's clock margin
    finally:
        local.stop()
        dmq_app.runtime.archive_sink = original  # type: ignore[method-assign]
    yield Run(data, sent, planted["MessageId"], throttled[0], sink.failures)


def _exports(data: Path, kind: str) -> list[Path]:
    return [p.parent for p in (data / "exports").rglob("manifest-summary.json")
            if json.loads(p.read_text()).get("exportType") == kind]


def _audit(data: Path, spark: Any, capsys: pytest.CaptureFixture[str],
           jobs: list[str] | None) -> tuple[int, list[str]]:
    args = argparse.Namespace(data_dir=str(data), out=str(data / "audit"), jobs=jobs)
    code = audit.run(args, spark)
    return code, capsys.readouterr().out.strip().splitlines()


def test_a_faulty_run_loses_nothing(audited_run: Run, spark: Any,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN faults really happened
    assert len(audited_run.sent) == MESSAGES
    assert audited_run.throttled > 0 and audited_run.archive_failures > 0
    # WHEN every job runs, as `make audit` runs them
    code, lines = _audit(audited_run.data, spark, capsys, None)
    # THEN stage progress shows, and the last line reports every message, none lost
    assert any(line.startswith("lifecycle_audit [7/7]") for line in lines), lines
    assert lines[-1] == SUMMARY.format(n=MESSAGES, lost=0), lines
    assert code == 0
    # AND every copy was judged: the incremental exports end where the stop left the table
    assert _exports(audited_run.data, "INCREMENTAL_EXPORT")
    audited = next(line for line in lines if line.startswith("audited "))
    assert "; 0 message copies" in audited, audited
    # AND latencies are on one clock: never negative
    latency = spark.read.parquet(str(audited_run.data / "audit" / "lifecycle_audit" / "latency"))
    worst = latency.selectExpr("min(latency_ms_p50) AS p50", "min(dwell_ms_p50) AS dwell").first()
    assert worst is not None and worst["p50"] >= 0 and worst["dwell"] >= 0, worst
    report = (audited_run.data / "audit" / "lifecycle_audit" / "report.md").read_text()
    assert f"**Clean: {MESSAGES} messages" in report
    assert (audited_run.data / "audit" / "lifecycle_audit" / "latency.png").stat().st_size > 0
    usage = next(line for line in lines if line.startswith("requests="))
    assert int(usage.split()[0].split("=")[1]) >= MESSAGES // 10 * 3


def test_a_planted_loss_is_found_exactly(audited_run: Run, spark: Any, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the archive without the REMOVE record of the item deleted behind DMQ's back
    data = tmp_path / "data"
    shutil.copytree(audited_run.data, data, ignore=shutil.ignore_patterns("audit"))
    dropped = 0
    for path in (data / "archive").rglob("*.json.gz"):
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        kept = [line for line in lines if not (
            json.loads(line)["eventName"] == "REMOVE"
            and json.loads(line)["dynamodb"]["Keys"]["sk"]["S"] == audited_run.planted)]
        dropped += len(lines) - len(kept)
        path.write_bytes(gzip.compress(("\n".join(kept) + "\n").encode()))
    assert dropped >= 1
    # WHEN the lifecycle audit runs
    code, lines = _audit(data, spark, capsys, ["lifecycle_audit"])
    # THEN exactly that message is lost, and the audit fails
    assert lines[-1] == SUMMARY.format(n=MESSAGES, lost=1), lines
    assert code == 1
    lost = spark.read.parquet(str(data / "audit" / "lifecycle_audit" / "lost")).collect()
    assert [row["message_id"] for row in lost] == [audited_run.planted]
