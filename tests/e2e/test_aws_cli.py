"""GIVEN the real local server in a subprocess WHEN the AWS CLI (`aws sqs ...`) drives it
THEN a queue is created, found, listed, described, and a message goes through it;
a missing queue makes the CLI fail with SQS's error code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

AWS = Path(sys.executable).parent / "aws"
CLI_TIMEOUT_S = 60


@pytest.fixture
def aws(dmq_url: str, tmp_path: Path) -> Any:
    """Run `aws sqs ...` against the server with dummy credentials and no config files."""
    if not AWS.exists():
        pytest.fail(f"the AWS CLI is not installed next to the interpreter: {AWS}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DMQ_"))}
    env.update(
        AWS_ACCESS_KEY_ID="dummy-key",
        AWS_SECRET_ACCESS_KEY="dummy-secret",
        AWS_CONFIG_FILE=str(tmp_path / "no-such-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-such-credentials"),
        AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_PAGER="",
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(AWS), "sqs", *args, "--endpoint-url", dmq_url, "--region", "us-east-1",
             "--output", "json"],
            env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
        )

    return run


def ok(result: subprocess.CompletedProcess[str]) -> Any:
    """The parsed JSON output of a command that must succeed (None when it prints nothing)."""
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_cli_queue_and_message_round_trip(aws: Any, dmq_url: str) -> None:
    name = f"cli-{uuid.uuid4().hex[:10]}"
    url = ok(aws("create-queue", "--queue-name", name))["QueueUrl"]
    assert url == f"{dmq_url}/000000000000/{name}"
    assert ok(aws("get-queue-url", "--queue-name", name))["QueueUrl"] == url

    sent = ok(aws("send-message", "--queue-url", url, "--message-body", "hello from the cli",
                  "--message-attributes",
                  '{"Source": {"DataType": "String", "StringValue": "aws-cli"}}'))
    assert sent["MessageId"]
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"hello from the cli").hexdigest()

    received = ok(aws("receive-message", "--queue-url", url, "--wait-time-seconds", "2",
                      "--attribute-names", "All", "--message-attribute-names", "All",
                      "--visibility-timeout", "60"))
    messages = received["Messages"]
    assert len(messages) == 1
    message = messages[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == "hello from the cli"
    assert message["MessageAttributes"]["Source"]["StringValue"] == "aws-cli"
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"

    attributes = ok(aws("get-queue-attributes", "--queue-url", url,
                        "--attribute-names", "All"))["Attributes"]
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{name}"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attributes["VisibilityTimeout"] == "30"

    assert ok(aws("delete-message", "--queue-url", url, "--receipt-handle",
                  message["ReceiptHandle"])) is None
    after = ok(aws("get-queue-attributes", "--queue-url", url, "--attribute-names",
                   "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"))
    assert after["Attributes"] == {"ApproximateNumberOfMessages": "0",
                                   "ApproximateNumberOfMessagesNotVisible": "0"}

    listed = ok(aws("list-queues", "--queue-name-prefix", name))
    assert listed["QueueUrls"] == [url]
    assert url in ok(aws("list-queues"))["QueueUrls"]


def test_cli_missing_queue_fails_with_the_sqs_error(aws: Any) -> None:
    result = aws("get-queue-url", "--queue-name", f"cli-missing-{uuid.uuid4().hex[:10]}")
    assert result.returncode != 0
    assert ("AWS.SimpleQueueService.NonExistentQueue" in result.stderr
            or "QueueDoesNotExist" in result.stderr), result.stderr
    assert "does not exist" in result.stderr
    assert result.stdout.strip() == ""
