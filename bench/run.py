"""`make bench`: DMQ's throughput, its DynamoDB cost per message, and receive cost vs backlog.

DMQ runs in this process (`LocalDmq`, with its embedded store unless DMQ_DYNAMODB_ENDPOINT
names one), so the DynamoDB requests of its message store can be counted with botocore hooks.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
from collections.abc import Sequence
from pathlib import Path

import app as dmq_app
from bench.backlog import BacklogConfig, run_backlogs
from bench.counting import DynamoCounter, messages_client
from bench.report import Figures, judge, markdown, write_json
from bench.shards import ShardsConfig, run_shards
from bench.sqs import sqs_client
from bench.throughput import ThroughputConfig, run_throughput
from dmqlocal import failover_demo
from dmqlocal.runner import LocalDmq, LocalOptions

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "bench.json"
# The retention sweep would add its own Queries to the counts; it is held off during a run.
NO_SCHEDULE = 1_000_000.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; --quick shrinks every size for a smoke run."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--messages", type=int, default=None,
                        help="messages in the throughput run (default 6000; quick 200)")
    parser.add_argument("--producers", type=int, default=None, help="default 4; quick 2")
    parser.add_argument("--consumers", type=int, default=None, help="default 8; quick 2")
    parser.add_argument("--receives", type=int, default=None,
                        help="receives at each backlog (default 200; quick 20)")
    parser.add_argument("--backlogs", default=None,
                        help="comma-separated backlogs (default 0,1000,10000; quick 0,50,300)")
    parser.add_argument("--shards", default=None,
                        help="comma-separated shard counts (default 1,2,4,8; quick 1,4)")
    parser.add_argument("--shard-messages", type=int, default=None,
                        help="messages in each shard run (default 1500; quick 100)")
    parser.add_argument("--failover-messages", type=int, default=None,
                        help="messages in each failover run (default 400; quick 0 skips)")
    parser.add_argument("--body-bytes", type=int, default=256, help="message body size")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"where to write the JSON figures (default {DEFAULT_OUTPUT})")
    args = parser.parse_args(argv)
    quick = bool(args.quick)
    defaults: dict[str, object] = {
        "messages": 200 if quick else 6000,
        "producers": 2 if quick else 4,
        "consumers": 2 if quick else 8,
        "receives": 20 if quick else 200,
        "backlogs": "0,50,300" if quick else "0,1000,10000",
        "shards": "1,4" if quick else "1,2,4,8",
        "shard_messages": 100 if quick else 1500,
        "failover_messages": 0 if quick else 400,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def measure(args: argparse.Namespace) -> Figures:
    """Start DMQ, run both benchmarks against it, stop it; return the figures."""
    local = LocalDmq(dmq_app.app, dmq_app.runtime,
                     LocalOptions(host="127.0.0.1", port=0, schedule_scale=NO_SCHEDULE))
    url = local.start()
    counter = DynamoCounter()
    try:
        counter.attach(messages_client())
        sqs = sqs_client(url, args.producers + args.consumers + 4)
        throughput = run_throughput(sqs, counter, ThroughputConfig(
            messages=args.messages, producers=args.producers, consumers=args.consumers,
            body_bytes=args.body_bytes,
        ))
        backlogs = tuple(int(b) for b in str(args.backlogs).split(",") if b.strip())
        backlog = run_backlogs(sqs, counter, BacklogConfig(
            backlogs=backlogs, receives=args.receives, body_bytes=args.body_bytes,
        ))
        shard_runs = run_shards(sqs, counter, ShardsConfig(
            shard_counts=tuple(int(n) for n in str(args.shards).split(",") if n.strip()),
            messages=args.shard_messages, producers=args.producers, consumers=args.consumers,
            body_bytes=args.body_bytes,
        ))
        store = local.store_description
    finally:
        counter.detach()
        local.stop()
    environment = {"store": store, "python": platform.python_version(),
                   "cpus": str(os.cpu_count() or 1), "endpoint": url}
    failovers = [failover_demo.run(mode, args.failover_messages, 180.0)
                 for mode in ("sync", "async")] if args.failover_messages else []
    return Figures(environment, throughput, backlog, shard_runs, failovers,
                   judge(throughput, backlog, shard_runs))


def bench(argv: Sequence[str] | None = None) -> Figures:
    """Run the benchmark, print the Markdown block, write the JSON; return the figures."""
    args = parse_args(argv)
    figures = measure(args)
    print("\n" + markdown(figures) + "\n", flush=True)
    write_json(figures, Path(args.output))
    print(f"Figures written to {args.output}", flush=True)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """The command-line entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    bench(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
