"""The in-memory store as a child process of the local server: its own interpreter, so
the store's work runs beside DMQ's on another core, as DynamoDB Local's JVM does."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from dmqlocal.child_process import die_with_parent, end_child, watch_child
from dmqlocal.dynamodb_local import StartCancelledError

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 2.0
READY = "listening on "


def _never() -> bool:
    return False


class MemoryStoreError(RuntimeError):
    """The in-memory store did not start."""


class MemoryStoreProcess:
    """`python -m dmqlocal.memstore` on a loopback port, stopped with the server (and by
    the kernel if the server dies: it gets SIGKILL, and its standard input closes)."""

    def __init__(self, on_exit: Callable[[int], None] | None = None,
                 cancelled: Callable[[], bool] = _never) -> None:
        self._on_exit = on_exit
        self._cancelled = cancelled
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self.port: int | None = None

    @property
    def endpoint(self) -> str:
        """The HTTP endpoint clients use."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def spawn(self) -> None:
        """Start the process without waiting for it (`start` waits)."""
        if self._process is not None:
            return
        self._process = subprocess.Popen(
            [sys.executable, "-m", "dmqlocal.memstore", "--until-stdin-closes"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ},
            preexec_fn=die_with_parent, start_new_session=True)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Spawn unless done, wait for its ready line; the endpoint."""
        self.spawn()
        process = self._process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            if self._cancelled():
                self.stop()
                raise StartCancelledError("starting the in-memory store")
            left = deadline - time.monotonic()
            if left <= 0 or process.poll() is not None:
                code = process.poll()
                self.stop()
                raise MemoryStoreError(
                    "the in-memory store did not start "
                    + (f"(it exited with code {code})" if code is not None
                       else f"within {timeout_s:.0f} s"))
            ready, _, _ = select.select([process.stdout], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(process.stdout.fileno(), 256)
                line += chunk if chunk else b"\n"
        text = line.decode(errors="replace").strip()
        if not text.startswith(READY):
            self.stop()
            raise MemoryStoreError(f"the in-memory store did not start: {text!r}")
        self.port = int(text[len(READY):])
        watch_child(process, "dmq-memstore-watch", self._stopping, self._on_exit)
        return self.endpoint

    def stop(self, at_once: bool = False) -> None:
        """SIGTERM and a bounded wait, then SIGKILL (`at_once`: SIGKILL straight away);
        what it held is gone either way."""
        self._stopping.set()
        process, self._process = self._process, None
        if process is None:
            return
        end_child(process, at_once, STOP_TIMEOUT_S)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
