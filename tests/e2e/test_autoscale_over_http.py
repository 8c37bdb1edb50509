"""GIVEN the local server (`make run`'s) with a fast autoscaler WHEN a standard or a FIFO
queue gets more messages per second than one shard's target THEN the server's own timer
splits it, `/metrics` and `dmq shards show` say so, and once the load stops the queue
merges back to one shard, with every message delivered (a FIFO queue's in each group's
order)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.e2e.conftest import ROOT, START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

ACCOUNT = "000000000000"
WAIT_S = 60.0


@pytest.fixture(scope="module")
def server() -> Iterator[DmqProcess]:
    dmq = launch(DMQ_SHARD_TARGET_RATE="4", DMQ_AUTOSCALE_INTERVAL_S="2",
                 DMQ_AUTOSCALE_CHECKS="2", DMQ_AUTOSCALE_COOLDOWN_S="4")
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


def _until(check: Callable[[], bool], timeout_s: float = WAIT_S) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout_s, "not within the time allowed"
        time.sleep(0.5)
    return time.monotonic() - started


def _dmq(server: DmqProcess, *argv: str) -> Any:
    """The `dmq` command, found through DMQ_ENDPOINT as a user would set it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMQ_", "AWS_"))}
    env.update(DMQ_ENDPOINT=server.url, AWS_ACCESS_KEY_ID="e2e-key",
               AWS_SECRET_ACCESS_KEY="e2e-secret", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    done = subprocess.run([str(Path(sys.executable).parent / "dmq"), "--json", *argv],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_server_splits_a_busy_queue_and_merges_it_back(server: DmqProcess) -> None:
    sqs: Any = boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id="e2e-key", aws_secret_access_key="e2e-secret",
                       config=Config(retries={"mode": "standard"}))
    url = sqs.create_queue(QueueName="elastic")["QueueUrl"]

    def shards() -> int:
        found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])
        return int(found["Attributes"]["DmqShardCount"])

    assert _dmq(server, "shards", "show", "elastic")["autoscale"] == "auto"
    # WHEN 20 messages a second are sent (5 times the target of 4 per shard)
    sent: set[str] = set()
    started = time.monotonic()
    while shards() == 1:
        assert time.monotonic() - started < WAIT_S, "no split within the time allowed"
        bodies = [f"m{len(sent) + i}" for i in range(10)]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]).get("Failed")
        sent |= set(bodies)
        time.sleep(0.5)
    # THEN the server's timer split it (x2 at most), and /metrics shows the count
    split = shards()
    assert split == 2  # from one shard, x2 at most
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert (f'dmq_queue_shards{{account="{ACCOUNT}",queue="elastic",region="us-east-1"}} '
            f"{float(split)}") in text
    # WHEN the load stops and the messages are consumed THEN it merges back to one shard
    received: set[str] = set()

    def drained() -> bool:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for message in got:
            received.add(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return received >= sent

    _until(drained)
    _until(lambda: shards() == 1)
    assert received == sent
    assert _dmq(server, "shards", "show", "elastic")["shard_count"] == 1


def test_the_server_splits_a_busy_fifo_queue_with_every_group_in_order(
    server: DmqProcess,
) -> None:
    sqs: Any = boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id="e2e-key", aws_secret_access_key="e2e-secret",
                       config=Config(retries={"mode": "standard"}))
    url = sqs.create_queue(QueueName="elastic.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]

    def shards() -> int:
        found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])
        return int(found["Attributes"]["DmqShardCount"])

    assert _dmq(server, "shards", "show", "elastic.fifo")["autoscale"] == "auto"
    # WHEN 20 messages a second go to 10 groups, numbered within each group, until the
    # timer splits the queue, and for 8 s more (past the switch, into the new shards)
    sent = 0
    started = time.monotonic()
    split_at: float | None = None
    while split_at is None or time.monotonic() - split_at < 8:
        assert time.monotonic() - started < WAIT_S + 8, "no split within the time allowed"
        entries = [{"Id": str(i), "MessageBody": f"g{(sent + i) % 10}-{(sent + i) // 10}",
                    "MessageGroupId": f"g{(sent + i) % 10}"} for i in range(10)]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")
        sent += 10
        if split_at is None and shards() > 1:
            split_at = time.monotonic()
        time.sleep(0.5)
    shown = _dmq(server, "shards", "show", "elastic.fifo")
    assert shown["shard_count"] >= 2
    # THEN every message comes once, each group in the order it was sent
    last: dict[str, int] = {}
    received = 0

    def drained() -> bool:
        nonlocal received
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for message in got:
            group, number = message["Body"].split("-")
            assert int(number) == last.get(group, -1) + 1, (group, number, last)
            last[group] = int(number)
            received += 1
        if got:
            sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        return received >= sent

    _until(drained)
    assert received == sent and sum(n + 1 for n in last.values()) == sent
    # AND once the load stops it merges back to one shard
    _until(lambda: shards() == 1)
