"""A bench stopped by SIGTERM stops the servers it started (they run in sessions of their
own, out of reach of a signal to the bench) and says so in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = """
import time
from bench.servers import start_moto
moto = start_moto()
try:
    print(moto.process.pid, flush=True)
    time.sleep(60)
finally:
    moto.stop()
"""
# A signal before the `try`: the server is stopped at the bench's exit all the same.
UNGUARDED = """
import time
from bench.servers import start_moto
moto = start_moto()
print(moto.process.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("script", [BENCH, UNGUARDED], ids=["in-a-try", "unguarded"])
def test_a_sigterm_stops_the_bench_and_its_server(script: str) -> None:
    # GIVEN a bench that started moto's server and waits
    bench = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server_pid = 0
    try:
        assert bench.stdout is not None
        server_pid = int(bench.stdout.readline())
        assert _alive(server_pid)
        # WHEN it gets a SIGTERM
        sent = time.monotonic()
        bench.send_signal(signal.SIGTERM)
        _, errors = bench.communicate(timeout=20)
        # THEN it ends promptly, its server with it, and says so in one line
        assert time.monotonic() - sent < 15
        deadline = time.monotonic() + 5
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server_pid)
        assert "Traceback" not in errors
        assert errors.strip() == (
            "bench stopped (SIGTERM); the servers it started are stopped.")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(timeout=10)
        if server_pid and _alive(server_pid):  # what a failure left behind
            os.killpg(server_pid, signal.SIGKILL)
