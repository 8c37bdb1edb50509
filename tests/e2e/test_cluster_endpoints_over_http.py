"""GIVEN the real local server on one DynamoDB Local, with cluster c2 on a second DynamoDB
Local of its own (DMQ_CLUSTER_ENDPOINTS)
WHEN `dmq queues create --cluster c2` makes a queue and boto3 sends, receives and deletes
THEN the counts follow (read from c2's stream by c2's own pump), the messages are in c2's
store, and the main store has no table of c2's; a bad DMQ_CLUSTER_ENDPOINTS stops the
server at once with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from chalicelib.aws import DUMMY_CREDENTIALS
from dmqlocal.dynamodb_local import DynamoDBLocal
from tests.e2e.conftest import (
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DmqProcess,
    free_port,
    server_env,
)

pytestmark = pytest.mark.e2e

DMQ = Path(sys.executable).parent / "dmq"
C2_TABLE = "dmq-messages-c2"
CLIENT = Config(connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 3})
COUNT_WAIT_S = 20.0
RUN_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def stores() -> Iterator[tuple[str, str]]:
    """Two DynamoDB Locals in memory: the main store and c2's; both stopped afterwards."""
    main, c2 = DynamoDBLocal(None), DynamoDBLocal(None)
    try:
        yield main.start(), c2.start()
    finally:
        main.stop()
        c2.stop()


def _env(data: Path, main: str, endpoints: str) -> dict[str, str]:
    # No AWS credentials: DMQ signs both stores with its dummy ones, as the test reads them.
    env = {k: v for k, v in server_env().items() if not k.startswith("AWS_")}
    return {**env, "HOME": str(data), "DMQ_DATA_DIR": str(data), "DMQ_DYNAMODB_ENDPOINT": main,
            "DMQ_CLUSTERS": "c2", "DMQ_CLUSTER_ENDPOINTS": endpoints}


@pytest.fixture(scope="module")
def server(stores: tuple[str, str],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[DmqProcess]:
    main, c2 = stores
    data = tmp_path_factory.mktemp("dmq-cluster-endpoints")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=_env(data, main, f"c2={c2}"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        yield dmq
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert "Traceback" not in dmq.output, dmq.output
    assert "stream poll failed" not in dmq.output, dmq.output


def _dynamodb(endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=DUMMY_CREDENTIALS[0],
                        aws_secret_access_key=DUMMY_CREDENTIALS[1], config=CLIENT)


def _dmq(server: DmqProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    """The `dmq` console script against the server, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DMQ_", "AWS_"))}
    env.update(DMQ_ENDPOINT=server.url, AWS_ACCESS_KEY_ID="cli-key",
               AWS_SECRET_ACCESS_KEY="cli-secret", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    done = subprocess.run([str(DMQ), *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(got[names[0]]), int(got[names[1]])


def _wait_counts(sqs: Any, url: str, expected: tuple[int, int]) -> None:
    deadline = time.monotonic() + COUNT_WAIT_S
    while (seen := _counts(sqs, url)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert seen == expected


def test_a_queue_on_c2_lives_in_c2s_own_store(server: DmqProcess,
                                              stores: tuple[str, str]) -> None:
    main, c2 = stores
    # GIVEN a queue created on c2 with the CLI
    made = _dmq(server, "queues", "create", "far", "--cluster", "c2", "--json")
    assert made.returncode == 0, made.stderr
    shards = _dmq(server, "shards", "show", "far")
    assert shards.returncode == 0 and "c2" in shards.stdout, shards
    sqs = boto3.client("sqs", endpoint_url=server.url, region_name="us-east-1",
                       aws_access_key_id="k", aws_secret_access_key="s", config=CLIENT)
    url = sqs.get_queue_url(QueueName="far")["QueueUrl"]
    # WHEN messages are sent
    sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"far-{i}"} for i in range(5)])
    # THEN they are in c2's store, and the main store has no table of c2's
    c2_items = _dynamodb(c2).scan(TableName=C2_TABLE, ConsistentRead=True)["Items"]
    assert sorted(i["pk"]["S"] for i in c2_items) == ["000000000000/far#0"] * 5
    assert C2_TABLE not in _dynamodb(main).list_tables()["TableNames"]
    assert C2_TABLE in _dynamodb(c2).list_tables()["TableNames"]
    assert "dmq-queues" not in _dynamodb(c2).list_tables()["TableNames"]
    # AND the counts come from c2's stream
    _wait_counts(sqs, url, (5, 0))
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                              VisibilityTimeout=60)["Messages"]
    _wait_counts(sqs, url, (3, 2))
    # AND everything is received and deleted
    for _ in range(10):
        more = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not more:
            break
        got += more
    assert sorted(m["Body"] for m in got) == [f"far-{i}" for i in range(5)]
    sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    _wait_counts(sqs, url, (0, 0))
    assert _dynamodb(c2).scan(TableName=C2_TABLE, ConsistentRead=True)["Items"] == []


def test_an_unknown_cluster_is_one_error_line(server: DmqProcess) -> None:
    done = _dmq(server, "queues", "create", "lost", "--cluster", "c9")
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "c9 is not a cluster of this deployment (default, c2)" in lines[0]


def test_a_bad_cluster_endpoint_stops_the_server_at_once(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dmqlocal", "--port", str(free_port())], cwd=ROOT,
        env=_env(tmp_path, "http://127.0.0.1:1", "c3=http://127.0.0.1:8001"),
        capture_output=True, text=True, timeout=60, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines == ["error: DMQ_CLUSTER_ENDPOINTS names cluster 'c3', which is not one of "
                     "DMQ_CLUSTERS (default, c2): add it there too."]
