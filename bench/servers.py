"""The servers the benchmark drives: moto's SQS server and DMQ on its default store, each a
subprocess on a loopback port, in a session of its own so that stopping it stops its children."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from botocore.exceptions import BotoCoreError, ClientError

from bench.sqs import sqs_client

ROOT = Path(__file__).resolve().parent.parent
READY = "DMQ is listening on"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
# What the server logs when it refuses requests 503: the breaker opening, a store error.
REFUSAL_MARKS = ("circuit breaker", "store error")
# What the bench sets itself (the caller's own would point DMQ elsewhere), and a deployed
# stage's settings, which a local server refuses.
_DROPPED = ("DMQ_DATA_DIR", "DMQ_STORE", "DMQ_DYNAMODB_ENDPOINT", "DMQ_COUNT_DYNAMODB",
            "DMQ_CHAOS", "DMQ_CHAOS_SEED", "DMQ_MESSAGES_STREAM_ARN", "DMQ_QUEUES_STREAM_ARN",
            "DMQ_RECEIPT_KEY_PARAMETER", "DMQ_CONSOLE_KEY_PARAMETER")


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """A server subprocess and the last lines it printed."""

    name: str
    process: subprocess.Popen[str]
    port: int
    started: float  # time.perf_counter() just before the process was spawned
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    # the lines that say why requests were refused (breaker, store errors), kept apart
    refusals: deque[str] = field(default_factory=lambda: deque(maxlen=40))

    @property
    def url(self) -> str:
        """The endpoint URL."""
        return f"http://127.0.0.1:{self.port}"

    def drain(self) -> None:
        """Read the output in the background so the server never blocks on a full pipe."""

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.tail.append(line)
                if any(mark in line for mark in REFUSAL_MARKS):
                    self.refusals.append(line)

        threading.Thread(target=read, name=f"bench-{self.name}-output", daemon=True).start()

    def wait_answering(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Poll ListQueues until it is answered (served, or refused for its credentials);
        return seconds since the process was spawned."""
        sqs = sqs_client(self.url, 1, read_timeout=10, attempts=1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                sqs.list_queues()
                return time.perf_counter() - self.started
            except ClientError as exc:  # refused (authentication required) is an answer
                if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500) < 500:
                    return time.perf_counter() - self.started
                time.sleep(0.05)
            except BotoCoreError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer on {self.url}; its last output:\n"
                           + "".join(self.tail))

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGINT (Ctrl-C) and a bounded wait, then SIGKILL to its whole session."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code: int | None = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        with contextlib.suppress(ProcessLookupError):  # whatever it started and left behind
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        _RUNNING[:] = [s for s in _RUNNING if s is not self]
        return code


# Servers started and not stopped yet: stopped at the bench's exit, should a signal have
# come before the `try` whose `finally` stops them.
_RUNNING: list[Server] = []


@atexit.register
def _stop_left_running() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop()


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _one_line(kind: type[BaseException], value: BaseException,
              trace: TracebackType | None) -> None:
    """A bench stopped by a signal or Ctrl-C says so in one line, not a traceback."""
    if issubclass(kind, KeyboardInterrupt):
        print(f"\nbench stopped ({value or 'SIGINT'}); the servers it started are stopped.",
              file=sys.stderr, flush=True)
        return
    sys.__excepthook__(kind, value, trace)


def stop_like_ctrl_c() -> None:
    """Make a SIGTERM or SIGHUP end this bench as Ctrl-C does: through the `finally`
    blocks that stop its servers. They run in process groups of their own (a Ctrl-C at the
    terminal must reach the bench alone, which then stops them in order), so nothing
    else stops them: a bench killed by SIGTERM used to leave DMQ and DynamoDB Local
    running. Only in the main thread, and only for a signal nobody handles yet."""
    if threading.current_thread() is not threading.main_thread():
        return
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _one_line
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _interrupted)


def _spawn(name: str, command: list[str], port: int, env: dict[str, str]) -> Server:
    stop_like_ctrl_c()
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    server = Server(name, process, port, started)
    _RUNNING.append(server)
    server.drain()
    return server


def start_moto() -> Server:
    """moto's server (`moto_server`) on a free loopback port, answering SQS."""
    port = free_port()
    moto = Path(sys.executable).parent / "moto_server"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = _spawn("moto", [str(moto), "-H", "127.0.0.1", "-p", str(port)], port, env)
    try:
        server.wait_answering()
    except BaseException:  # Ctrl-C while it starts must not leave it running
        server.stop()
        raise
    return server


def start_dmq(data_dir: Path, port: int | None = None,
              extra_env: dict[str, str] | None = None) -> Server:
    """`python -m dmqlocal` on its default store with the DynamoDB counts on (and
    `extra_env`, which may turn them off); the caller waits with `wait_answering` (it
    times the start)."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(DMQ_COUNT_DYNAMODB="1", PYTHONUNBUFFERED="1")
    env.update(extra_env or {})
    env.setdefault("AWS_ACCESS_KEY_ID", "dmq-bench")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "dmq-bench")
    command = [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port),
               "--data-dir", str(data_dir)]
    return _spawn("dmq", command, port, env)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The fourth field, after the parenthesised command (which may hold spaces).
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_mib(pid: int) -> float:
    """VmRSS of a process and all its descendants, in MiB (Linux /proc)."""
    total, pending, seen = 0, [pid], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        total += _rss_kib(current)
        pending += _children(current)
    return round(total / 1024, 1)


def _tree(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending += _children(current)
    return found


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, quiet_share: float = 0.15, quiet_s: float = 2.0,
              timeout_s: float = 300.0) -> float:
    """Wait until a server and its children use less than `quiet_share` of one CPU for
    `quiet_s` in a row (its stream pump has archived what a preload wrote, its periodic
    work is done); return the seconds waited (at most `timeout_s`)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        pids = _tree(pid)
        before = _cpu_seconds(pids)
        time.sleep(quiet_s)
        if _cpu_seconds(pids) - before < quiet_share * quiet_s:
            break
    return round(time.monotonic() - started, 1)
