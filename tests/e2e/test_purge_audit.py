"""GIVEN the real local server on its default store, driven over HTTP by boto3: one queue
purged with messages in flight and its removal let finish, another purged just before
the server stops (its removal cut short), and messages sent to the first after its purge
WHEN the audit runs over what the server archived and exported
THEN it reports every message sent and none lost: a purged message is removed once its
delete reaches the stream, and one the removal had not reached yet is still in the table
(issue #31: "the audit of that run is still exact")."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

import app as dmq_app
from chalicelib.backend.items import partition_key
from chalicelib.settings import Settings
from dmqlocal import audit
from dmqlocal.runner import LocalDmq, LocalOptions
from tests.e2e.conftest import LOCALSTACK

pytestmark = pytest.mark.e2e

BEFORE = 1_500  # sent to each queue before its purge
IN_FLIGHT = 40  # of them received (not deleted) before the purge
AFTER = 30  # sent to the first queue after its purge: kept
SHARDS = 8  # a new queue's shards are among the first eight
REMOVAL_TIMEOUT_S = 60.0
SUMMARY = "messages={n} lost=0 duplicates=0 fifo_violations=0"


@dataclass
class Run:
    data: Path
    sent: int
    held_after_removal: int  # what the first queue's shards held once its removal ended
    left_by_the_stop: int  # purged messages of the second queue still stored at the stop


def _client(endpoint: str) -> Any:
    return boto3.client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k",
        aws_secret_access_key="s",
        config=Config(retries={"mode": "standard", "max_attempts": 10}, read_timeout=30))


def _send(sqs: Any, url: str, count: int, tag: str) -> int:
    sent = 0
    for start in range(0, count, 10):
        result = sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": f"{tag} {start + i}"}
            for i in range(min(10, count - start))])
        assert not result.get("Failed"), result
        sent += len(result["Successful"])
    return sent


def _in_flight(sqs: Any, url: str) -> None:
    taken = 0
    for _ in range(IN_FLIGHT):  # a receive of ten finds some in a queue of BEFORE
        if taken >= IN_FLIGHT:
            return
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
        taken += len(got.get("Messages", []))
    assert taken >= IN_FLIGHT, f"only {taken} received"


def _stored(db: Any, table: str, url: str) -> int:
    """The items the queue's shards hold in the store (counted there, not by DMQ)."""
    queue_id = "/".join(url.rsplit("/", 2)[-2:])
    held = 0
    for shard in range(SHARDS):
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": table, "Select": "COUNT", "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": partition_key(queue_id, shard)}}}
            if start:
                request["ExclusiveStartKey"] = start
            page = db.query(**request)
            held += int(page["Count"])
            start = page.get("LastEvaluatedKey")
            if not start:
                break
    return held


@pytest.fixture(scope="module")
def purged_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    data = tmp_path_factory.mktemp("dmq-data")
    settings = replace(Settings.from_env(), dynamodb_endpoint=LOCALSTACK or None,
                       s3_endpoint=None, regions=(), data_dir=str(data), export_interval_s=5.0)
    local = LocalDmq(dmq_app.app, dmq_app.runtime,
                     LocalOptions(port=0, settings=settings, pump_interval_s=0.05))
    try:
        sqs = _client(local.start())
        store = dmq_app.runtime.backend().stores.of("default")
        finished = sqs.create_queue(QueueName="purged-finished")["QueueUrl"]
        cut_short = sqs.create_queue(QueueName="purged-cut-short")["QueueUrl"]
        sent = _send(sqs, finished, BEFORE, "before") + _send(sqs, cut_short, BEFORE, "before")
        _in_flight(sqs, finished)
        _in_flight(sqs, cut_short)
        sqs.purge_queue(QueueUrl=finished)
        time.sleep(0.01)  # a send in the purge's own millisecond may be purged with it
        sent += _send(sqs, finished, AFTER, "after")
        deadline = time.monotonic() + REMOVAL_TIMEOUT_S
        held = _stored(store._db, store.table, finished)
        while held > AFTER and time.monotonic() < deadline:
            time.sleep(0.2)
            held = _stored(store._db, store.table, finished)
        time.sleep(1.0)  # the sends past the audit's clock margin
        sqs.purge_queue(QueueUrl=cut_short)
        left = _stored(store._db, store.table, cut_short)  # then the stop, at once
    finally:
        local.stop()
    yield Run(data, sent, held, left)


def test_the_audit_of_a_run_with_purges_is_exact(purged_run: Run, spark: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the first purge's removal ended, and the second's did not before the stop
    assert purged_run.sent == 2 * BEFORE + AFTER
    assert purged_run.held_after_removal == AFTER
    assert purged_run.left_by_the_stop > 0
    # WHEN the lifecycle audit runs over the data folder
    args = argparse.Namespace(data_dir=str(purged_run.data), out=str(purged_run.data / "audit"),
                              jobs=["lifecycle_audit"])
    code = audit.run(args, spark)
    lines = capsys.readouterr().out.strip().splitlines()
    # THEN every message sent is accounted for, none lost
    assert lines[-1] == SUMMARY.format(n=purged_run.sent), lines
    assert code == 0
