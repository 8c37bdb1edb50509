"""The real local server (`python -m dmqlocal`) as a subprocess, shared by a session."""

from __future__ import annotations

import atexit
import functools
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[2]
READY = "DMQ is listening on"
STOPPED = "DMQ stopped."
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
START_ATTEMPTS = 3  # a freshly picked port can be taken before the server binds it


@dataclass
class DmqProcess:
    """A running `python -m dmqlocal` and everything it has printed so far."""

    process: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def start_reading(self) -> None:
        """Drain stdout (stderr is merged into it) so the server never blocks on a full pipe."""

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.append(line)
                self._queue.put(line)
            self._queue.put(None)

        self._reader = threading.Thread(target=read, name="dmq-e2e-output", daemon=True)
        self._reader.start()

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the ready line shows; False when the process ends or time runs out."""
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                return False
            if READY in line:
                return True
        return False

    def stop(self, timeout_s: float) -> int | None:
        """SIGINT (Ctrl-C), then a bounded wait; killed (and None returned) if it hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code: int | None = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            code = None
        if self._reader is not None:
            self._reader.join(timeout=5)
        return code


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# `make test-localstack` (localstack/run_tests.py) sets this to LocalStack's endpoint:
# every server the tests start then keeps its tables and buckets there.
LOCALSTACK = os.environ.get("DMQ_TEST_LOCALSTACK", "")


@functools.cache
def _data_root() -> str:
    """One temporary folder for the data folders of every server this process starts,
    removed when the process ends (after every fixture has stopped its server)."""
    root = tempfile.mkdtemp(prefix="dmq-e2e-data-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def server_env() -> dict[str, str]:
    """This environment without DMQ_* settings, with dummy credentials (and LocalStack as
    the store when DMQ_TEST_LOCALSTACK names it).

    The long-poll re-read interval is longer than any wait but the wake-up test's
    margin, so a long poll that returns early can only have been woken by the send.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMQ_")}
    if LOCALSTACK:
        env.update(DMQ_DYNAMODB_ENDPOINT=LOCALSTACK, DMQ_S3_ENDPOINT=LOCALSTACK)
    env.update(
        AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
        AWS_ACCESS_KEY_ID="e2e-key",
        AWS_SECRET_ACCESS_KEY="e2e-secret",
        AWS_DEFAULT_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
        DMQ_LONG_POLL_INTERVAL_MS="5000",
        # The audit archive of the shared server goes to a temporary folder, not the tree.
        DMQ_DATA_DIR=tempfile.mkdtemp(prefix="server-", dir=_data_root()),
    )
    return env


def launch(port: int | None = None, **env: str) -> DmqProcess:
    """Start `python -m dmqlocal` (what `make run` runs) with these environment changes."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env={**server_env(), **env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    dmq = DmqProcess(process=process, port=port)
    dmq.start_reading()
    return dmq


def _launch(port: int) -> DmqProcess:
    return launch(port)


@pytest.fixture(scope="session")
def dmq_server() -> Iterator[DmqProcess]:
    """DMQ serving on a free loopback port; stopped with SIGINT after the session."""
    failures: list[str] = []
    dmq: DmqProcess | None = None
    for _ in range(START_ATTEMPTS):
        candidate = _launch(free_port())
        if candidate.wait_ready(START_TIMEOUT_S):
            dmq = candidate
            break
        candidate.stop(STOP_TIMEOUT_S)
        failures.append(candidate.output)
    if dmq is None:
        pytest.fail("DMQ did not start:\n" + "\n----\n".join(failures))
    assert f"{READY} {dmq.url}" in dmq.output

    yield dmq

    code = dmq.stop(STOP_TIMEOUT_S)
    assert code is not None, f"DMQ did not stop within {STOP_TIMEOUT_S} s:\n{dmq.output}"
    assert code == 0, f"DMQ exited {code}:\n{dmq.output}"
    assert STOPPED in dmq.output, dmq.output
    # An HTTP 500 is always a bug: the server logs "unexpected error" with its traceback.
    assert "unexpected error" not in dmq.output, dmq.output
    assert "Traceback" not in dmq.output, dmq.output


@pytest.fixture(scope="session")
def dmq_url(dmq_server: DmqProcess) -> str:
    """The server's endpoint URL (http://127.0.0.1:PORT)."""
    return dmq_server.url


ClientFactory = Callable[..., Any]

CLIENT_CONFIG = Config(
    connect_timeout=5, read_timeout=30, retries={"total_max_attempts": 1},
)


@pytest.fixture(scope="session")
def make_sqs(dmq_url: str) -> ClientFactory:
    """Build a boto3 SQS client for the server (another endpoint or region if asked)."""

    def make(endpoint_url: str | None = None, region_name: str = "us-east-1") -> Any:
        return boto3.client(
            "sqs", endpoint_url=endpoint_url or dmq_url, region_name=region_name,
            aws_access_key_id="any-key", aws_secret_access_key="any-secret",
            config=CLIENT_CONFIG,
        )

    return make


@pytest.fixture
def sqs(make_sqs: ClientFactory) -> Any:
    """boto3's real SQS client talking HTTP to the local server."""
    return make_sqs()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Queue names unique to this test, so tests sharing the server never collide."""
    stem = request.node.name.replace("test_", "", 1)[:30].replace("[", "-").replace("]", "")
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in stem)

    def make(suffix: str = "q") -> str:
        return f"{stem}-{suffix}-{uuid.uuid4().hex[:8]}"

    return make
