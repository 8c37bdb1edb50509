"""`make soak`: DMQ on its default store at a fixed rate for a long time; is it flat?

Producers send batches of ten on a fixed schedule, consumers receive and delete what is
there, and every 10 s a sample records the window's latencies, the RSS of DMQ and its
DynamoDB Local child, and the queue depth. DMQ runs as a subprocess on a fresh data
folder; it is stopped (children included) and the folder removed at the end, Ctrl-C too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import Server, start_dmq, tree_rss_mib
from bench.soak_report import OPERATIONS, Sample, SoakFigures, judge, markdown, plot
from bench.sqs import BATCH, entries, sqs_client
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
SEND, RECEIVE, DELETE = OPERATIONS
JOIN_TIMEOUT_S = 30.0


class _Soak:
    """The worker threads' shared state."""

    def __init__(self, endpoint: str, url: str, rate: float, producers: int) -> None:
        self.endpoint = endpoint
        self.url = url
        self.period_s = BATCH * producers / rate  # each producer's time between batches
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.started = time.perf_counter()
        self.calls: list[tuple[float, str, float]] = []
        self.window: list[tuple[str, float]] = []
        self.sent = 0
        self.deleted = 0
        self.errors = 0

    def record(self, operation: str, began: float) -> None:
        elapsed = time.perf_counter() - began
        with self.lock:
            self.calls.append((began - self.started, operation, elapsed))
            self.window.append((operation, elapsed))

    def failed(self) -> None:
        with self.lock:
            self.errors += 1

    def produce(self, number: int) -> None:
        sqs = sqs_client(self.endpoint)
        next_at = time.perf_counter()
        batch = 0
        while not self.stop.wait(max(0.0, next_at - time.perf_counter())):
            next_at += self.period_s
            began = time.perf_counter()
            try:
                reply = sqs.send_message_batch(
                    QueueUrl=self.url, Entries=entries(number * 10**9 + batch * BATCH, BATCH, 256))
                self.record(SEND, began)
                with self.lock:
                    self.sent += len(reply.get("Successful", []))
            except (BotoCoreError, ClientError):
                self.failed()
            batch += 1

    def consume(self) -> None:
        sqs = sqs_client(self.endpoint)
        while not self.stop.is_set():
            try:
                self._receive_and_delete(sqs)
            except (BotoCoreError, ClientError):
                self.failed()

    def _receive_and_delete(self, sqs: Any) -> None:
        began = time.perf_counter()
        messages = sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=BATCH,
                                       WaitTimeSeconds=1).get("Messages", [])
        if not messages:
            return
        self.record(RECEIVE, began)
        began = time.perf_counter()
        reply = sqs.delete_message_batch(QueueUrl=self.url, Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)])
        self.record(DELETE, began)
        with self.lock:
            self.deleted += len(reply.get("Successful", []))

    def sample(self, sqs: Any, pid: int) -> Sample:
        """Close the current window."""
        with self.lock:
            window, self.window = self.window, []
            deleted = self.deleted
        try:
            attributes = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
            depth = sum(int(v) for v in attributes["Attributes"].values())
        except (BotoCoreError, ClientError):
            depth = -1
        by_op = {op: [s * 1000 for o, s in window if o == op] for op in OPERATIONS}
        return Sample(round(time.perf_counter() - self.started, 1),
                      {op: round(percentile(v, 50), 2) for op, v in by_op.items()},
                      {op: round(percentile(v, 99), 2) for op, v in by_op.items()},
                      tree_rss_mib(pid), depth, deleted)


def _drive(dmq: Server, args: argparse.Namespace) -> SoakFigures:
    sqs = sqs_client(dmq.url)
    url = sqs.create_queue(QueueName="dmq-soak")["QueueUrl"]
    soak = _Soak(dmq.url, url, args.rate, args.producers)
    threads = [threading.Thread(target=soak.produce, args=(n,), name=f"soak-producer-{n}")
               for n in range(args.producers)]
    threads += [threading.Thread(target=soak.consume, name=f"soak-consumer-{n}")
                for n in range(args.consumers)]
    for thread in threads:
        thread.start()
    samples: list[Sample] = []
    try:
        ends = soak.started + args.duration
        while (left := ends - time.perf_counter()) > 0:
            time.sleep(min(args.interval, left))
            samples.append(soak.sample(sqs, dmq.process.pid))
            print(_progress(samples[-1]), flush=True)
    finally:
        soak.stop.set()
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
    return SoakFigures(args.duration, args.rate, samples, soak.calls, soak.sent, soak.deleted,
                       soak.errors)


def _progress(s: Sample) -> str:
    p99 = ", ".join(f"{op} {s.p99_ms[op]:.0f}" for op in OPERATIONS)
    return f"{s.at_s:7.1f} s  p99 ms: {p99}; RSS {s.rss_mib:.0f} MiB; depth {s.depth}"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds (default 1800)")
    parser.add_argument("--rate", type=float, default=50.0, help="messages/s (default 50)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs",
                        help="where soak.md and soak.png go (default docs/)")
    parser.add_argument("--json", type=Path, default=ROOT / ".dmq" / "soak.json",
                        help="the samples as JSON (default .dmq/soak.json)")
    return parser.parse_args(argv)


def soak(argv: Sequence[str] | None = None) -> SoakFigures:
    """Run the soak, write soak.md, soak.png and the JSON samples; return the figures."""
    args = parse_args(argv)
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-soak-data-"))
    try:
        dmq = start_dmq(data_dir)
        try:
            dmq.wait_answering()
            figures = _drive(dmq, args)
        finally:
            dmq.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    figures.verdict = judge(figures)
    out: Path = args.output_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.md").write_text(markdown(figures), encoding="utf-8")
    plot(figures, out / "soak.png")
    summary = {k: v for k, v in asdict(figures).items() if k != "calls"}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print("\n" + markdown(figures), flush=True)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """The command-line entry point."""
    soak(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
