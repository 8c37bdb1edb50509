"""Every store mode is worth choosing: DMQ on its default store (DynamoDB Local over a
data folder) against `DMQ_STORE=memory` (DMQ's own in-memory store, dmqlocal/memstore),
one server after the other, each on a fresh folder, in one run.

Each server gets the same work: a lifecycle of batches of ten (producers and consumers
at once, 1 KiB bodies) after a warm-up, then single SendMessage, ReceiveMessage and
DeleteMessage calls one at a time. The targets (issue #33): the memory store's lifecycle
at least 2x the default store's, and its single calls at least as fast.

    python -m bench.store_modes [--quick] [--messages N] [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.counting import NoCounter
from bench.servers import start_dmq, wait_idle
from bench.single_ops import SingleOpsResult, run_single_ops
from bench.throughput import ThroughputConfig, ThroughputResult, run_throughput

MODES = ("dynamodb-local", "memory")
BODY_BYTES = 1024
LIFECYCLE_TARGET = 2.0  # the memory store's lifecycle against the default store's


@dataclass(frozen=True)
class ModeResult:
    """One store mode: its lifecycle and its single calls."""

    mode: str
    lifecycle: ThroughputResult
    single: SingleOpsResult


def measure_mode(mode: str, messages: int, rounds: int, workers: int) -> ModeResult:
    """A server on `mode` with a fresh data folder: warm-up, lifecycle, single calls."""
    folder = Path(tempfile.mkdtemp(prefix=f"dmq-bench-{mode}-"))
    try:
        server = start_dmq(folder, extra_env={"DMQ_STORE": mode, "DMQ_COUNT_DYNAMODB": "0"})
        try:
            server.wait_answering()
            config = ThroughputConfig(messages=messages // 4, producers=workers,
                                      consumers=workers, body_bytes=BODY_BYTES,
                                      timeout_s=120.0, queue_name="warm-up")
            run_throughput(server.url, NoCounter(), config)
            wait_idle(server.process.pid, timeout_s=30.0)
            lifecycle = run_throughput(server.url, NoCounter(), ThroughputConfig(
                messages=messages, producers=workers, consumers=workers,
                body_bytes=BODY_BYTES, timeout_s=300.0, queue_name="lifecycle"))
            wait_idle(server.process.pid, timeout_s=30.0)
            single = run_single_ops(server.url, rounds, body_bytes=BODY_BYTES)
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ModeResult(mode, lifecycle, single)


def report(results: Sequence[ModeResult]) -> list[str]:
    """The table, then the verdicts against the targets."""
    lines = ["| store | lifecycle msg/s | send p50 ms | receive p50 ms | delete p50 ms |",
             "|---|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.mode} | {r.lifecycle.messages_per_s:.1f} | "
                     f"{r.single.send.p50_ms:.2f} | {r.single.receive.p50_ms:.2f} | "
                     f"{r.single.delete.p50_ms:.2f} |")
    by_mode = {r.mode: r for r in results}
    default, memory = by_mode.get("dynamodb-local"), by_mode.get("memory")
    if default is not None and memory is not None:
        ratio = memory.lifecycle.messages_per_s / max(default.lifecycle.messages_per_s, 1e-9)
        faster = all(getattr(memory.single, op).p50_ms <= getattr(default.single, op).p50_ms
                     for op in ("send", "receive", "delete"))
        lines.append(f"memory lifecycle / default: {ratio:.2f}x (target >= "
                     f"{LIFECYCLE_TARGET:g}x: {'PASS' if ratio >= LIFECYCLE_TARGET else 'FAIL'})")
        lines.append(f"memory single calls at least as fast: {'PASS' if faster else 'FAIL'}")
    for r in results:
        lost = r.lifecycle.sent - r.lifecycle.delivered
        lines.append(f"{r.mode}: sent {r.lifecycle.sent}, delivered {r.lifecycle.delivered}, "
                     f"not delivered {lost}, errors {r.lifecycle.errors}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each mode, print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.store_modes", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="single calls of each kind")
    parser.add_argument("--workers", type=int, default=4, help="producers, and consumers")
    args = parser.parse_args(argv)
    messages = args.messages or (200 if args.quick else 4000)
    rounds = args.rounds or (20 if args.quick else 200)
    results = [measure_mode(mode, messages, rounds, args.workers) for mode in MODES]
    print("\n".join(report(results)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
