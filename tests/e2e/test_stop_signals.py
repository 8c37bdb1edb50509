"""GIVEN `python -m dmqlocal` on DynamoDB Local WHEN bursts of hundreds of SIGINT and
SIGTERM arrive from another process at each phase (starting, serving, stopping), or
DynamoDB Local is killed at each phase, THEN the process ends promptly, prints no
traceback, leaves no DynamoDB Local behind, and a restart on the same data folder has
every acknowledged message."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import boto3

from tests.e2e.conftest import START_TIMEOUT_S, STOPPED, DmqProcess, launch

BURST = 300
EXIT_S = 15.0  # a forced stop is immediate; a clean one flushes a little first
JAR = "DynamoDBLocal.jar"


def _store_pids(data_dir: str) -> list[int]:
    """The DynamoDB Local processes whose database is under `data_dir`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if JAR in command and f"{data_dir}/dynamodb" in command:
            found.append(int(entry.name))
    return found


def _wait_for_store(data_dir: str, timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = _store_pids(data_dir)
        if pids:
            return pids[0]
        time.sleep(0.02)
    raise AssertionError("DynamoDB Local never started")


def _burst(pid: int, count: int = BURST) -> None:
    """`count` signals, SIGINT and SIGTERM in turn, as fast as they go."""
    for i in range(count):
        try:
            os.kill(pid, signal.SIGINT if i % 2 else signal.SIGTERM)
        except ProcessLookupError:
            return


def _ends(dmq: DmqProcess, data_dir: str) -> int:
    """The exit status, once the process ended within EXIT_S; its store is gone too."""
    try:
        code = dmq.process.wait(timeout=EXIT_S)
    finally:
        if dmq.process.poll() is None:
            dmq.stop(5)
    if dmq._reader is not None:
        dmq._reader.join(timeout=5)
    assert "Traceback" not in dmq.output, dmq.output
    deadline = time.monotonic() + 5
    while _store_pids(data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _store_pids(data_dir), "DynamoDB Local outlived DMQ"
    return code


def _client(dmq: DmqProcess) -> object:
    return boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s")


def test_a_burst_of_signals_while_starting_ends_the_process(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    _wait_for_store(data_dir)  # DMQ is starting DynamoDB Local now
    _burst(dmq.process.pid)
    _ends(dmq, data_dir)
    assert "DMQ is listening" not in dmq.output


def test_a_burst_of_signals_right_after_launch_ends_the_process(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    time.sleep(0.3)  # importing its modules
    _burst(dmq.process.pid)
    _ends(dmq, data_dir)


def test_a_burst_while_serving_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
    sqs = _client(dmq)
    url = sqs.create_queue(QueueName="kept")["QueueUrl"]  # type: ignore[attr-defined]
    sqs.send_message(QueueUrl=url, MessageBody="acknowledged")  # type: ignore[attr-defined]
    _burst(dmq.process.pid)
    _ends(dmq, data_dir)
    again = launch(DMQ_DATA_DIR=data_dir)  # the lock was released; the data is there
    try:
        assert again.wait_ready(START_TIMEOUT_S), again.output
        got = _client(again).receive_message(  # type: ignore[attr-defined]
            QueueUrl=url.replace(str(dmq.port), str(again.port)), WaitTimeSeconds=5)
    finally:
        again.stop(30)
    assert [m["Body"] for m in got["Messages"]] == ["acknowledged"]


def test_a_burst_while_stopping_ends_the_process(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
    dmq.process.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    _burst(dmq.process.pid)
    _ends(dmq, data_dir)
    assert STOPPED in dmq.output


def test_one_sigterm_stops_cleanly_with_status_0(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
    assert (Path(data_dir) / "server.json").is_file()
    dmq.process.send_signal(signal.SIGTERM)
    assert _ends(dmq, data_dir) == 0
    assert dmq.output.rstrip().endswith(STOPPED), dmq.output
    assert not (Path(data_dir) / "server.json").exists()


def test_dynamodb_local_killed_while_starting(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    os.kill(_wait_for_store(data_dir), signal.SIGKILL)
    assert _ends(dmq, data_dir) == 1
    assert "error: DynamoDB Local" in dmq.output, dmq.output
    assert f"{data_dir}/dynamodb" in dmq.output


def test_dynamodb_local_killed_while_serving(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
    os.kill(_wait_for_store(data_dir), signal.SIGKILL)
    assert _ends(dmq, data_dir) == 1
    assert "error: DynamoDB Local stopped unexpectedly (exit code -9)" in dmq.output


def test_dynamodb_local_killed_while_stopping(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    dmq = launch(DMQ_DATA_DIR=data_dir)
    assert dmq.wait_ready(START_TIMEOUT_S), dmq.output
    store = _wait_for_store(data_dir)
    dmq.process.send_signal(signal.SIGTERM)
    os.kill(store, signal.SIGKILL)
    _ends(dmq, data_dir)
    assert STOPPED in dmq.output
