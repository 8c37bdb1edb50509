"""GIVEN `python -m dmqlocal` (what `make run` starts) WHEN it is stopped with
Ctrl-C right after it is ready, even twice, THEN it stops cleanly; and the account in
queue URLs comes from DMQ_ACCOUNT_ID."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time

import boto3

from tests.e2e.conftest import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    STOPPED,
    DmqProcess,
    launch,
)


def _start(**env: str) -> DmqProcess:
    return launch(**env)


def test_two_quick_ctrl_c_still_stop_cleanly() -> None:
    dmq = _start()
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        dmq.process.send_signal(signal.SIGINT)
        time.sleep(0.05)
        if dmq.process.poll() is None:
            dmq.process.send_signal(signal.SIGINT)
        # Two signals, no third: the cleanup below signals again only if it hangs.
        with contextlib.suppress(subprocess.TimeoutExpired):
            dmq.process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert code == 0, dmq.output
    assert STOPPED in dmq.output
    assert "Traceback" not in dmq.output


def test_account_id_comes_from_the_environment() -> None:
    dmq = _start(DMQ_ACCOUNT_ID="123456789012")
    try:
        assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
        sqs = boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                           aws_access_key_id="k", aws_secret_access_key="s")
        url = sqs.create_queue(QueueName="accounted")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    finally:
        code = dmq.stop(STOP_TIMEOUT_S)
    assert url == f"{dmq.url}/123456789012/accounted"
    assert arn["Attributes"]["QueueArn"] == "arn:aws:sqs:us-east-1:123456789012:accounted"
    assert code == 0
