"""The local server's store processes, as children: each dies with the server, is
watched for an end the server did not ask for, and is stopped in one bounded way.
Shared by DynamoDB Local (`dmqlocal.dynamodb_local`) and the in-memory store
(`dmqlocal.memstore.process`)."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import threading
from collections.abc import Callable


def watch_child(process: subprocess.Popen[bytes], name: str, stopping: threading.Event,
                on_exit: Callable[[int], None] | None) -> None:
    """Call `on_exit(code)` from a daemon thread if the child ends while `stopping` is not
    set (a store that died under the server)."""
    def watch() -> None:
        code = process.wait()
        if not stopping.is_set() and on_exit is not None:
            on_exit(code)

    threading.Thread(target=watch, name=name, daemon=True).start()


def end_child(process: subprocess.Popen[bytes], at_once: bool, timeout_s: float) -> None:
    """Stop a child process: SIGTERM and a bounded wait, then SIGKILL (`at_once`: SIGKILL
    straight away); returns once it has exited."""
    if process.poll() is not None:
        return
    if at_once:
        process.kill()
    else:
        process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)


def die_with_parent() -> None:
    """In the child: get SIGKILL when the parent dies (kill -9 leaves no orphan on Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
