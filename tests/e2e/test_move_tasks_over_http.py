"""GIVEN the real local server (DynamoDB Local) WHEN boto3 runs message move tasks over HTTP
THEN dead letters go back at the task's rate, a cancel stops the task, and a task survives
the server being killed and started again, every message moved exactly once."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.conftest import START_TIMEOUT_S, STOP_TIMEOUT_S, DmqProcess, launch

pytestmark = pytest.mark.e2e
CONFIG = Config(connect_timeout=2, read_timeout=10, retries={"total_max_attempts": 1})


def _arn(sqs: Any, url: str) -> str:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(found["Attributes"]["QueueArn"])


def _pipe(sqs: Any, name: Callable[[str], str]) -> tuple[str, str, str]:
    """(source, DLQ, destination) URLs; the source dead-letters after one receive."""
    dlq = sqs.create_queue(QueueName=name("dlq"))["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": _arn(sqs, dlq), "maxReceiveCount": 1})
    source = sqs.create_queue(QueueName=name("src"), Attributes={"RedrivePolicy": policy})
    destination = sqs.create_queue(QueueName=name("dst"))["QueueUrl"]
    return str(source["QueueUrl"]), str(dlq), str(destination)


def _dead_letter(sqs: Any, source: str, bodies: list[str]) -> None:
    for body in bodies:
        sqs.send_message(QueueUrl=source, MessageBody=body)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
        if not got.get("Messages"):
            return
    raise AssertionError("messages did not reach the DLQ")


def _collect(sqs: Any, url: str, expected: int, timeout_s: float = 30) -> list[str]:
    """Receive and delete until `expected` messages came (or time ran out)."""
    bodies: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(bodies) < expected and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", []):
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return bodies


def _wait_task(sqs: Any, source_arn: str, done: Callable[[dict[str, Any]], bool],
               timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        results = sqs.list_message_move_tasks(SourceArn=source_arn)["Results"]
        if results and done(results[0]):
            return dict(results[0])
        time.sleep(0.3)
    raise AssertionError(f"task never got there: {results}")


def test_basic_workflow_over_http(sqs: Any, unique_name: Callable[[str], str]) -> None:
    # GIVEN two dead letters
    source, dlq, destination = _pipe(sqs, unique_name)
    _dead_letter(sqs, source, ["message-1", "message-2"])
    dlq_arn = _arn(sqs, dlq)
    # WHEN a task moves them to another queue
    handle = sqs.start_message_move_task(SourceArn=dlq_arn,
                                         DestinationArn=_arn(sqs, destination))["TaskHandle"]
    assert handle
    # THEN the scheduled back end delivers them and the task completes
    assert sorted(_collect(sqs, destination, 2)) == ["message-1", "message-2"]
    task = _wait_task(sqs, dlq_arn, lambda t: t["Status"] == "COMPLETED")
    assert task["ApproximateNumberOfMessagesMoved"] == 2
    assert task["ApproximateNumberOfMessagesToMove"] == 2
    assert "TaskHandle" not in task
    assert sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=1).get("Messages") is None


def test_redrive_to_the_original_source_over_http(
    sqs: Any, unique_name: Callable[[str], str]
) -> None:
    source, dlq, _destination = _pipe(sqs, unique_name)
    _dead_letter(sqs, source, ["home-again"])
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq))
    assert _collect(sqs, source, 1) == ["home-again"]


def test_rate_of_one_a_second_over_http(sqs: Any, unique_name: Callable[[str], str]) -> None:
    # GIVEN four dead letters and a task at one message a second
    source, dlq, destination = _pipe(sqs, unique_name)
    _dead_letter(sqs, source, [f"message-{i}" for i in range(4)])
    started = time.monotonic()
    sqs.start_message_move_task(SourceArn=_arn(sqs, dlq), DestinationArn=_arn(sqs, destination),
                                MaxNumberOfMessagesPerSecond=1)
    # THEN moving four takes at least three seconds
    assert len(_collect(sqs, destination, 4, timeout_s=60)) == 4
    assert time.monotonic() - started >= 3


def test_errors_over_http(sqs: Any, unique_name: Callable[[str], str]) -> None:
    plain = sqs.create_queue(QueueName=unique_name("plain"))["QueueUrl"]
    with pytest.raises(ClientError) as exc:
        sqs.start_message_move_task(SourceArn=_arn(sqs, plain))
    assert exc.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert exc.value.response["Error"]["Message"] == (
        "Source queue must be configured as a Dead Letter Queue.")
    with pytest.raises(ClientError) as exc:
        sqs.cancel_message_move_task(TaskHandle="foobared")
    assert exc.value.response["Error"]["Message"] == "Value for parameter TaskHandle is invalid."
    with pytest.raises(sqs.exceptions.ResourceNotFoundException) as missing:
        sqs.list_message_move_tasks(SourceArn=_arn(sqs, plain) + "-gone")
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_cancel_over_http(sqs: Any, unique_name: Callable[[str], str]) -> None:
    # GIVEN ten dead letters moving at one a second, two of them arrived
    source, dlq, destination = _pipe(sqs, unique_name)
    _dead_letter(sqs, source, [f"m{i}" for i in range(10)])
    dlq_arn = _arn(sqs, dlq)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination),
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    assert len(_collect(sqs, destination, 2)) == 2
    # WHEN it is cancelled
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert moved >= 2
    # THEN it ends CANCELLED and the rest stay in the DLQ
    task = _wait_task(sqs, dlq_arn, lambda t: t["Status"] == "CANCELLED")
    assert task["ApproximateNumberOfMessagesMoved"] < 10
    assert sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=1).get("Messages")


def _start(data: Path) -> DmqProcess:
    dmq = launch(None, DMQ_DATA_DIR=str(data))
    if not dmq.wait_ready(START_TIMEOUT_S):
        dmq.stop(STOP_TIMEOUT_S)
        pytest.fail(f"DMQ did not start:\n{dmq.output}")
    return dmq


def _client(dmq: DmqProcess) -> Any:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s", config=CONFIG)


def test_task_survives_a_kill_and_restart_moving_each_message_once(tmp_path: Path) -> None:
    # GIVEN a server moving 8 dead letters at 2 a second
    dmq = _start(tmp_path)
    try:
        sqs = _client(dmq)
        source, dlq, destination = _pipe(sqs, lambda suffix: f"restart-{suffix}")
        bodies = [f"m{i}" for i in range(8)]
        _dead_letter(sqs, source, bodies)
        dlq_arn = _arn(sqs, dlq)
        handle = sqs.start_message_move_task(
            SourceArn=dlq_arn, DestinationArn=_arn(sqs, destination),
            MaxNumberOfMessagesPerSecond=2)["TaskHandle"]
        before = _wait_task(sqs, dlq_arn, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 2)
        assert before["Status"] == "RUNNING"
        # WHEN the server is killed (SIGKILL: no shutdown at all) in the middle of the task
        dmq.process.send_signal(signal.SIGKILL)
        dmq.process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        dmq.stop(STOP_TIMEOUT_S)
    # AND started again over the same data folder
    dmq = _start(tmp_path)
    try:
        sqs = _client(dmq)
        # THEN the task is still there and runs to its end
        task = _wait_task(sqs, dlq_arn, lambda t: t["Status"] == "COMPLETED", timeout_s=60)
        assert task["ApproximateNumberOfMessagesMoved"] == 8
        assert task["StartedTimestamp"] == before["StartedTimestamp"]
        # AND every message is in the destination exactly once, none left in the DLQ
        assert sorted(_collect(sqs, destination, 8)) == bodies
        assert _collect(sqs, destination, 1, timeout_s=2) == []
        assert sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=1).get("Messages") is None
        with pytest.raises(ClientError) as exc:
            sqs.cancel_message_move_task(TaskHandle=handle)
        assert exc.value.response["Error"]["Code"] == (
            "AWS.SimpleQueueService.UnsupportedOperation")
    finally:
        assert dmq.stop(STOP_TIMEOUT_S) == 0
