"""GIVEN an external DynamoDB/S3 endpoint (moto's server standing in for LocalStack)
WHEN localstack/deploy.py provisions it and DMQ runs against it
THEN an SQS round trip works, large bodies included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMQ_")}
    env.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
               AWS_DEFAULT_REGION="us-east-1", **extra)
    return env


@pytest.fixture
def endpoint() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _wait_for(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("DMQ did not start in 30 s")


def test_deploy_script_then_dmq_on_the_external_endpoint(endpoint: str) -> None:
    deployed = subprocess.run(
        [sys.executable, "localstack/deploy.py", "--endpoint", endpoint],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert deployed.returncode == 0, deployed.stderr
    assert "table dmq-messages: stream arn:aws:dynamodb:" in deployed.stdout

    port = _free_port()
    env = _env(DMQ_DYNAMODB_ENDPOINT=endpoint, DMQ_S3_ENDPOINT=endpoint,
               DMQ_INLINE_BODY_LIMIT="1000")
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url, process)
        sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                           aws_access_key_id="k", aws_secret_access_key="s")
        queue = sqs.create_queue(QueueName="external")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="x" * 5000)
        got = sqs.receive_message(QueueUrl=queue)["Messages"][0]
        assert got["Body"] == "x" * 5000
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=got["ReceiptHandle"])
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="k", aws_secret_access_key="s")
        deadline = time.monotonic() + 15
        while s3.list_objects_v2(Bucket="dmq-bodies").get("KeyCount", 0) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        assert s3.list_objects_v2(Bucket="dmq-bodies").get("KeyCount", 0) == 0
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "(external store)" in output
    assert "DMQ stopped." in output
