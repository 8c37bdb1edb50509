"""`make bench`: moto's SQS server and DMQ on its default store, side by side over HTTP.

Each server runs as a subprocess, one after the other so they do not share the CPUs:
moto first, then DMQ (`python -m dmqlocal`, fresh data folder, its DynamoDB requests
counted inside it). DMQ is then stopped with Ctrl-C and started again on the same folder
to time a warm start; the folder is removed at the end. First, DynamoDB Local alone
(`bench/floor.py`) measures the store's floor: what no code on top of it can beat.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import (
    auth,
    autoscale,
    encryption,
    fair,
    fair_share,
    fifo,
    idle_cost,
    isolation,
    push,
    request_cost,
    request_dedup,
    scale,
    stop_time,
    store_modes,
    throttle,
)
from bench.attributes import AttributesResult, measure_attributes
from bench.backlog import BacklogConfig, BacklogResult, run_backlogs
from bench.counting import Counter, NoCounter, RemoteCounter
from bench.floor import measure_floor
from bench.report import Figures, build_rows, markdown, write_outputs
from bench.servers import (
    STOP_TIMEOUT_S,
    Server,
    start_dmq,
    start_moto,
    tree_rss_mib,
    wait_idle,
)
from bench.shards import ShardResult, ShardsConfig, run_shards
from bench.single_ops import SingleOpsResult, run_single_ops
from bench.sqs import sqs_client
from bench.throughput import ThroughputConfig, ThroughputResult, run_throughput

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "bench.json"
# A slow server is measured on what it delivered by then, so a run stays near two minutes.
LIFECYCLE_TIMEOUT_S = 150.0
ATTRIBUTES_MAX_S = 60.0
FULL = {"moto_messages": 600, "dmq_messages": 6000, "producers": 4, "consumers": 4,
        "single_calls": 200, "receives": 200, "backlogs": "100,10000",
        "attribute_backlogs": "100,100000", "attribute_calls": 200, "shards": "1,4",
        "shard_messages": 600, "floor_messages": 4000, "floor_calls": 300,
        "settle_timeout": 300.0}
QUICK = {"moto_messages": 40, "dmq_messages": 200, "producers": 2, "consumers": 2,
         "single_calls": 20, "receives": 20, "backlogs": "100,500",
         "attribute_backlogs": "100,1000", "attribute_calls": 20, "shards": "",
         "shard_messages": 100, "floor_messages": 400, "floor_calls": 30,
         "settle_timeout": 15.0}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; --quick shrinks every size for a smoke run."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    for name, value in FULL.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=None,
                            help=f"default {value!r}; quick {QUICK[name]!r}")
    parser.add_argument("--body-bytes", type=int, default=256, help="message body size")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"the JSON figures (default {DEFAULT_OUTPUT}); Markdown beside it")
    args = parser.parse_args(argv)
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in str(text).split(",") if n.strip())


def _lifecycle(endpoint: str, counter: Counter, messages: int,
               args: argparse.Namespace) -> ThroughputResult:
    return run_throughput(endpoint, counter, ThroughputConfig(
        messages=messages, producers=args.producers, consumers=args.consumers,
        body_bytes=args.body_bytes, timeout_s=LIFECYCLE_TIMEOUT_S,
        queue_name="dmq-bench-lifecycle"))


def measure_moto(args: argparse.Namespace) -> tuple[ThroughputResult, SingleOpsResult]:
    """The lifecycle and single-operation figures of moto's SQS server."""
    moto = start_moto()
    try:
        lifecycle = _lifecycle(moto.url, NoCounter(), args.moto_messages, args)
        single = run_single_ops(moto.url, args.single_calls, body_bytes=args.body_bytes)
    finally:
        moto.stop()
    return lifecycle, single


class _DmqFigures:
    """What the DMQ phases gather, in the order they run."""

    lifecycle: ThroughputResult
    single: SingleOpsResult
    backlog: list[BacklogResult]
    attributes: list[AttributesResult]
    rss_mib: float
    shards: list[ShardResult]
    stop_s: float
    stop_code: int | None
    warm_start_s: float
    messages_after_restart: int


def _dmq_phases(dmq: Server, args: argparse.Namespace, out: _DmqFigures) -> None:
    counter = RemoteCounter(dmq.url)

    def settle() -> float:
        return wait_idle(dmq.process.pid, timeout_s=args.settle_timeout)

    out.lifecycle = _lifecycle(dmq.url, counter, args.dmq_messages, args)
    settle()
    out.single = run_single_ops(dmq.url, args.single_calls, body_bytes=args.body_bytes)
    out.backlog = run_backlogs(dmq.url, counter, BacklogConfig(
        backlogs=_sizes(args.backlogs), receives=args.receives, body_bytes=args.body_bytes,
        settle=settle))
    # Before the large backlog: its periodic table exports would slow the shard runs.
    out.shards = run_shards(dmq.url, counter, ShardsConfig(
        shard_counts=_sizes(args.shards), messages=args.shard_messages,
        producers=args.producers, consumers=args.consumers, body_bytes=args.body_bytes))
    out.attributes = [measure_attributes(dmq.url, n, args.attribute_calls, ATTRIBUTES_MAX_S,
                                         args.body_bytes, settle)
                      for n in _sizes(args.attribute_backlogs)]
    out.rss_mib = tree_rss_mib(dmq.process.pid)


def _held(endpoint: str, backlogs: tuple[int, ...]) -> int:
    """Messages the largest attributes queue holds (after the restart: all of them)."""
    if not backlogs:
        return 0
    sqs = sqs_client(endpoint)
    url = sqs.get_queue_url(QueueName=f"dmq-bench-attributes-{backlogs[-1]}")["QueueUrl"]
    reply = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(reply["Attributes"]["ApproximateNumberOfMessages"])


def measure_dmq(args: argparse.Namespace) -> _DmqFigures:
    """Every DMQ phase on a fresh data folder, then a warm start on the same folder."""
    out = _DmqFigures()
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-data-"))
    try:
        dmq = start_dmq(data_dir)
        try:
            dmq.wait_answering()
            _dmq_phases(dmq, args, out)
        finally:
            stopping = time.perf_counter()
            out.stop_code = dmq.stop()
            out.stop_s = round(time.perf_counter() - stopping, 1)
        again = start_dmq(data_dir, dmq.port)
        try:
            out.warm_start_s = round(again.wait_answering(), 2)
            out.messages_after_restart = _held(again.url, _sizes(args.attribute_backlogs))
        finally:
            again.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def measure(args: argparse.Namespace) -> Figures:
    """moto, then DMQ; return the figures."""
    environment: dict[str, str] = {
        "command": "python -m bench.run" + (" --quick" if args.quick else ""),
        "python": platform.python_version(), "cpus": str(os.cpu_count() or 1),
        "load": " / ".join(f"{n:.1f}" for n in os.getloadavg()),
    }
    floor = measure_floor(args.floor_messages, args.producers, args.consumers,
                          args.floor_calls)
    moto_lifecycle, moto_single = measure_moto(args)
    dmq = measure_dmq(args)
    lifecycle = {"moto": moto_lifecycle, "dmq": dmq.lifecycle}
    single = {"moto": moto_single, "dmq": dmq.single}
    rows = build_rows(lifecycle, single, dmq.backlog, dmq.attributes, dmq.rss_mib,
                      dmq.warm_start_s)
    stopped = ("exit code 0" if dmq.stop_code == 0 else
               f"exit code {dmq.stop_code}" if dmq.stop_code is not None else
               f"no exit within {STOP_TIMEOUT_S:g} s, so killed")
    environment["restart"] = (f"Ctrl-C stop took {dmq.stop_s} s ({stopped}); after the warm "
                              f"start the largest queue held {dmq.messages_after_restart:,} "
                              "messages")
    return Figures(environment, lifecycle, single, dmq.backlog, dmq.attributes, dmq.rss_mib,
                   dmq.warm_start_s, dmq.shards, rows, floor)


def bench(argv: Sequence[str] | None = None) -> Figures:
    """Run the benchmark, print the Markdown block, write JSON and Markdown; return them."""
    args = parse_args(argv)
    figures = measure(args)
    print("\n" + markdown(figures) + "\n", flush=True)
    md_path = write_outputs(figures, Path(args.output))
    print(f"Figures written to {args.output} and {md_path}", flush=True)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """The command-line entry point: the benchmark, then the benchmarks of single features,
    each with servers of its own: fair queues (`bench/fair.py`), FIFO (`bench/fifo.py`),
    the cost of authentication (`bench/auth.py`), throttling across processes
    (`bench/throttle.py`), a quiet tenant's sends under another's flood
    (`bench/fair_share.py`), push delivery latency (`bench/push.py`), what request
    deduplication and TLS cost a send (`bench/request_dedup.py`), the cost of
    encryption at rest (`bench/encryption.py`), how long a SIGTERM takes against the
    messages stored (`bench/stop_time.py`) and what an idle server costs its store
    (`bench/idle_cost.py`), what each SQS call costs the store in requests, latency
    and dollars (`bench/request_cost.py`), how shards follow a ramp of load
    (`bench/autoscale.py`), what a frozen cluster does to the others
    (`bench/isolation.py`), DMQ at the scale of many waiting consumers, queues and
    messages (`bench/scale.py`), and the memory store against the default one
    (`bench/store_modes.py`)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    bench(argv)
    quick = parse_args(argv).quick
    # Fair queues: the quiet tenants' dwell time under a flood (servers of its own).
    fair.main(["--quick"] if quick else [])
    fifo.main(["--quick"] if quick else [])
    # What authentication costs: DMQ_AUTH open against required (servers of its own).
    auth.main(["--quick"] if quick else [])
    # Throttling: 4 servers over one store against the configured rate.
    throttle.main(["--quick"] if quick else [])
    # Fair share: a quiet tenant's sends while another floods (a server of its own).
    fair_share.main(["--quick"] if quick else [])
    # Push delivery: send -> subscriber latency (a server of its own).
    push.main(["--quick"] if quick else [])
    # What request deduplication and TLS cost a send (servers of its own).
    request_dedup.main(["--quick"] if quick else [])
    # Encryption at rest: send and receive p50 with SSE off and on (a server of its own).
    encryption.main(["--quick"] if quick else [])
    # One SIGTERM against 10,000 to 500,000 stored messages (servers of its own).
    stop_time.main(["--quick"] if quick else [])
    # An idle server's store requests per second, and its wake-up delay (a server of its own).
    idle_cost.main(["--quick"] if quick else [])
    # Store requests, latency and dollars per SQS call, against the store's own (its own
    # servers: DMQ behind a counting proxy, then on the store directly).
    request_cost.main(["--quick"] if quick else [])
    # Shard autoscaling under a ramp to 5x the per-shard target (a server of its own).
    autoscale.main(["--quick"] if quick else [])
    # One cluster's store frozen, the others' latency and errors (a server and two more
    # DynamoDB Locals of its own).
    isolation.main(["--quick"] if quick else [])
    # DMQ at scale: waiting consumers, 10,000 queues, a million messages, fair share at that
    # size (servers of their own, one after the other).
    scale.main(["--quick"] if quick else [])
    # The store modes: DMQ_STORE=memory against the default store, side by side.
    store_modes.main(["--quick"] if quick else [])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
