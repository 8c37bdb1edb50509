"""GIVEN a fresh clone of the repository WHEN the README's first command, `make run`,
runs in it exactly as written (no DMQ_* settings, the default data folder and port) and
the README's AWS CLI lines run in an empty environment THEN the queue is created, the
message sent is received, and Ctrl-C stops the server cleanly.

The clone reuses the virtual environment and DynamoDB Local that `make test` has just
installed from the same files (their stamps are kept current, so `make` installs
nothing again); everything else is the clone's own: its Makefile, code and README."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import READY, ROOT, STOPPED

README_PORT = 9324
START_S = 120.0
STOP_S = 20.0


def _use_it(readme: Path) -> tuple[str, dict[str, str], list[list[str]]]:
    """The README's first command, its `export`, and its `aws sqs` lines, in order."""
    text = readme.read_text()
    block = text.split("## Use it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    first = next(line for line in lines if line)
    export = next(line for line in lines if line.startswith("export "))
    env = dict(word.split("=", 1) for word in shlex.split(export)[1:])
    commands = [shlex.split(line) for line in lines if re.search(r"\baws sqs ", line)]
    return first, env, commands


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh clone of this repository, with the installed venv and tools linked in."""
    target = tmp_path / "dmq"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(target)], check=True,
                   timeout=120)
    for installed in (".venv", ".tools"):
        (target / installed).symlink_to(ROOT / installed)
    for prerequisite in ("requirements.txt", "requirements-run.txt", "requirements-test.txt",
                         "requirements-dev.txt", "pyproject.toml"):
        os.utime(target / prerequisite, (0, 0))  # older than the venv's install stamp
    return target


def _user_env(home: Path) -> dict[str, str]:
    """A user's environment: no DMQ_* settings, no AWS configuration (HOME is empty)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DMQ_", "AWS_", "PYTEST_", "MAKE", "MFLAGS"))}
    return {**env, "HOME": str(home)}


@pytest.fixture
def make_run(clone: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    first, _, _ = _use_it(clone / "README.md")
    assert first == "make run", first
    home = tmp_path / "home"
    home.mkdir()
    process = subprocess.Popen(shlex.split(first), cwd=clone, env=_user_env(home),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines: list[str] = []
    try:
        yield process, lines
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _read_until(process: subprocess.Popen[str], lines: list[str], marker: str,
                timeout_s: float) -> bool:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            return False
        lines.append(line)
        if marker in line:
            return True
    return False


def test_make_run_on_a_fresh_clone_serves_the_readme_commands(
    clone: Path, tmp_path: Path, make_run: tuple[subprocess.Popen[str], list[str]],
) -> None:
    process, lines = make_run
    assert _read_until(process, lines, READY, START_S), "".join(lines)
    assert f"http://127.0.0.1:{README_PORT}" in lines[-1]
    assert f"data in {clone / '.dmq' / 'dynamodb'}" in lines[-1]

    _, exported, commands = _use_it(clone / "README.md")
    env = {**_user_env(tmp_path / "home"), **exported}
    outputs = []
    for command in commands:
        result = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 0, (command, result.stderr)
        outputs.append(json.loads(result.stdout) if result.stdout.strip() else {})
    actions = [command[2] for command in commands]
    assert actions == ["create-queue", "send-message", "receive-message"], actions
    assert outputs[0]["QueueUrl"] == f"http://127.0.0.1:{README_PORT}/000000000000/q"
    assert [m["Body"] for m in outputs[2]["Messages"]] == ["hello"]
    assert [m["MessageId"] for m in outputs[2]["Messages"]] == [outputs[1]["MessageId"]]

    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches make and DMQ alike
    _read_until(process, lines, STOPPED, STOP_S)
    process.wait(timeout=STOP_S)
    output = "".join(lines)
    assert STOPPED in output, output
    assert "Traceback" not in output, output
    assert (clone / ".dmq" / "dynamodb").is_dir()
