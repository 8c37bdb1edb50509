"""GIVEN `python -m dmqlocal` (what `make run` starts) WHEN what it needs is missing or
taken THEN it refuses at once, before starting DynamoDB Local, with one paragraph that
names the port, folder or tool, exit status 1, and no traceback."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from tests.e2e.conftest import CLIENT_CONFIG, ROOT, free_port, launch, server_env

QUICK_S = 10.0  # far less than a DynamoDB Local start; the checks take milliseconds


def _run(tmp_path: Path, port: int | None = None, **env: str) -> tuple[int, str, float]:
    """Run the server to its end; (exit status, what it printed, seconds)."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "dmqlocal", "--port", str(port or free_port())],
        cwd=ROOT, env={**server_env(), "DMQ_DATA_DIR": str(tmp_path / "data"), **env},
        capture_output=True, text=True, timeout=60, check=False)
    return result.returncode, result.stdout + result.stderr, time.monotonic() - started


def _one_paragraph(output: str) -> str:
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: "), output
    return lines[0]


def test_a_taken_port_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, output, seconds = _run(tmp_path, port)
    assert code == 1
    assert f"Port {port} on 127.0.0.1 is already in use" in _one_paragraph(output)
    assert seconds < QUICK_S
    assert not (tmp_path / "data" / "dynamodb").exists()  # nothing was started


def test_a_data_folder_in_use_is_refused_with_the_other_pid(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with (folder / "dmq.lock").open("w") as lock:  # held as a running DMQ holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        code, output, seconds = _run(tmp_path)
    assert code == 1
    line = _one_paragraph(output)
    assert f"Another DMQ (pid {os.getpid()})" in line
    assert str(folder) in line
    assert seconds < QUICK_S


def test_a_data_folder_that_cannot_be_created_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    code, output, seconds = _run(tmp_path, DMQ_DATA_DIR=str(tmp_path / "a-file" / "data"))
    assert code == 1
    line = _one_paragraph(output)
    assert f"The data folder {tmp_path / 'a-file' / 'data'} cannot be used" in line
    assert seconds < QUICK_S


def test_a_relative_data_folder_is_made_absolute_for_dynamodb_local(tmp_path: Path) -> None:
    """The default `.dmq` is relative: the message names the absolute folder."""
    (tmp_path / ".dmq").write_text("a file where the folder should be")
    result = subprocess.run(
        [sys.executable, "-m", "dmqlocal", "--port", str(free_port())],
        cwd=tmp_path, env={**server_env(), "DMQ_DATA_DIR": ".dmq",
                           "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert f"The data folder {tmp_path / '.dmq'} cannot be used" in _one_paragraph(
        result.stdout + result.stderr)


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH that holds only these tools (links to the real ones)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    return str(folder)


def test_missing_java_is_named(tmp_path: Path) -> None:
    code, output, seconds = _run(tmp_path, PATH=_path_with(tmp_path, "npm"))
    assert code == 1
    line = _one_paragraph(output)
    assert "Java was not found on the PATH" in line
    assert "DMQ_STORE=memory" in line
    assert seconds < QUICK_S


def test_missing_npm_is_named_when_dynamodb_local_is_not_installed(tmp_path: Path) -> None:
    code, output, seconds = _run(tmp_path, PATH=_path_with(tmp_path, "java"),
                                 DMQ_TOOLS_DIR=str(tmp_path / "tools"))
    assert code == 1
    line = _one_paragraph(output)
    assert "npm was not found on the PATH" in line
    assert str(tmp_path / "tools") in line
    assert seconds < QUICK_S


def test_the_memory_store_needs_no_java(tmp_path: Path) -> None:
    """The checks ask only for what the chosen store needs: memory needs no Java."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--port", str(free_port())],
        cwd=ROOT, env={**server_env(), "DMQ_DATA_DIR": str(tmp_path / "data"),
                       "DMQ_STORE": "memory", "PATH": _path_with(tmp_path, "git")},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "DMQ is listening on" in first, first + out
    assert proc.returncode == 0, first + out


def test_the_memory_store_runs_in_a_process_of_its_own_and_leaves_nothing(
        tmp_path: Path) -> None:
    """GIVEN DMQ_STORE=memory THEN the store is DMQ's in-memory store in a child process
    (no JVM, no database file in the data folder), a large body round-trips, and the
    stop leaves neither the store's process nor a scratch folder of large bodies behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    dmq = launch(DMQ_STORE="memory", DMQ_DATA_DIR=str(tmp_path / "data"), TMPDIR=str(scratch))
    try:
        assert dmq.wait_ready(60), dmq.output
        assert "in-memory store: nothing is kept" in dmq.output
        children = _children(dmq.process.pid)
        assert any("dmqlocal.memstore" in c for c in children.values()), children
        assert not any("java" in c for c in children.values()), children
        store_pid = next(p for p, c in children.items() if "dmqlocal.memstore" in c)
        sqs = boto3.client("sqs", endpoint_url=dmq.url, region_name="us-east-1",
                           aws_access_key_id="any-key", aws_secret_access_key="any-secret",
                           config=CLIENT_CONFIG)
        url = sqs.create_queue(QueueName="big")["QueueUrl"]
        body = "b" * 290_000  # above the inline limit: kept in the scratch folder
        sqs.send_message(QueueUrl=url, MessageBody=body)
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
        assert got[0]["Body"] == body
        assert [p.name for p in scratch.iterdir() if p.name.startswith("dmq-memory-bodies-")]
    finally:
        dmq.process.send_signal(signal.SIGINT)
        dmq.process.wait(timeout=30)
    assert dmq.process.returncode == 0, dmq.output
    assert not (tmp_path / "data" / "dynamodb").exists()
    assert not [p for p in scratch.iterdir() if p.name.startswith("dmq-memory-bodies-")]
    assert not Path(f"/proc/{store_pid}").exists()


def test_java_options_from_the_setting_reach_dynamodb_local(tmp_path: Path) -> None:
    """DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS come after DMQ's own JVM options (so they win)."""
    dmq = launch(DMQ_DATA_DIR=str(tmp_path / "data"),
                 DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS="-Xmx300m -XX:+AlwaysPreTouch")
    try:
        assert dmq.wait_ready(60), dmq.output
        java = [c for c in _child_commands(dmq.process.pid) if "DynamoDBLocal.jar" in c]
        assert len(java) == 1, java
        words = java[0].split()
        assert words.index("-Xmx300m") > words.index("-Xmx256m")
        assert "-XX:+AlwaysPreTouch" in words
    finally:
        dmq.process.send_signal(signal.SIGINT)
        dmq.process.wait(timeout=30)


def test_unreadable_java_options_are_one_paragraph(tmp_path: Path) -> None:
    code, output, seconds = _run(tmp_path, DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS='-Xmx1g "-Dx=1')
    assert code == 1
    line = _one_paragraph(output)
    assert "DMQ_DYNAMODB_LOCAL_JAVA_OPTIONS cannot be read" in line
    assert seconds < QUICK_S


def test_a_memory_store_that_dies_stops_dmq_with_one_clear_paragraph(tmp_path: Path) -> None:
    """GIVEN DMQ on the in-memory store WHEN the store's process is killed THEN DMQ stops
    with exit code 1 and says what happened to the in-memory store (its data is gone),
    without a traceback."""
    dmq = launch(DMQ_STORE="memory", DMQ_DATA_DIR=str(tmp_path / "data"))
    try:
        assert dmq.wait_ready(60), dmq.output
        store_pid = next(p for p, c in _children(dmq.process.pid).items()
                         if "dmqlocal.memstore" in c)
        os.kill(store_pid, signal.SIGKILL)
        dmq.process.wait(timeout=30)
    finally:
        if dmq.process.poll() is None:
            dmq.process.kill()
            dmq.process.wait(timeout=30)
    assert dmq.process.returncode == 1, dmq.output
    assert "The in-memory store stopped unexpectedly" in dmq.output
    assert "What it held is gone" in dmq.output
    assert "DynamoDB Local" not in dmq.output.split("listening on", 1)[-1]
    assert "Traceback" not in dmq.output


def _children(pid: int) -> dict[int, str]:
    """The process's children: their command lines by process id."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) != pid:
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
    return found


def _child_commands(pid: int) -> list[str]:
    """The command lines of the process's children."""
    return list(_children(pid).values())
