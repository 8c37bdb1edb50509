"""Push delivery latency: from the send to the subscriber, p50 and p99.

DMQ runs on its default store (fresh data folder). A loopback HTTP endpoint is subscribed
to a standard queue (BatchSize 10, no batching window). Messages are sent one at a time at
a steady rate; the latency of each is the time from just before its SendMessage call to
its arrival at the endpoint, both read from this process's clock. Every message must
arrive; duplicates (at least once) are counted.

    python -m bench.push [--messages N] [--rate PER_SECOND] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3

from bench.servers import start_dmq
from bench.sqs import sqs_client
from bench.timing import Latency
from dmqcli.admin_api import AdminApi

DELIVERY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class PushResult:
    """What one run measured."""

    sent: int
    delivered: int
    duplicates: int
    batches: int
    latency: Latency
    send: Latency


class _Arrivals:
    """The arrival time of each message body at the endpoint (first arrival only)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first: dict[str, float] = {}
        self.duplicates = 0
        self.batches = 0

    def add(self, records: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self.lock:
            self.batches += 1
            for record in records:
                if record["body"] in self.first:
                    self.duplicates += 1
                else:
                    self.first[record["body"]] = now


def _endpoint(arrivals: _Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            arrivals.add(event["Records"])
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def measure(messages: int, rate: float) -> PushResult:
    """One run: a server, a subscribed endpoint, `messages` sends at `rate` per second."""
    # The admin route is signed (SigV4 for execute-api) with the environment's credentials;
    # in DMQ's open local mode any key of its own account is an admin.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "dmq-bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "dmq-bench")
    data = Path(tempfile.mkdtemp(prefix="dmq-bench-push-"))
    arrivals = _Arrivals()
    endpoint = _endpoint(arrivals)
    serving = threading.Thread(target=endpoint.serve_forever, daemon=True)
    serving.start()
    # The endpoint is on loopback, which push endpoints may reach only when allowed.
    dmq = start_dmq(data, extra_env={"DMQ_PUSH_ALLOWED_NETWORKS": "127.0.0.0/8"})
    try:
        dmq.wait_answering()
        sqs = sqs_client(dmq.url)
        url = sqs.create_queue(QueueName="bench-push")["QueueUrl"]
        admin = AdminApi(dmq.url, "us-east-1", boto3.session.Session().get_credentials())
        admin.post("/admin/queues/000000000000/bench-push/subscriptions",
                   {"Endpoint": f"http://127.0.0.1:{endpoint.server_address[1]}/",
                    "BatchSize": 10})
        sqs.send_message(QueueUrl=url, MessageBody="warm-up")
        _wait(arrivals, {"warm-up"})
        sent: dict[str, float] = {}
        calls: list[float] = []
        start = time.monotonic()
        for i in range(messages):
            pause = start + i / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sent[str(i)] = time.monotonic()
            sqs.send_message(QueueUrl=url, MessageBody=str(i))
            calls.append(time.monotonic() - sent[str(i)])
        _wait(arrivals, set(sent))
        with arrivals.lock:
            samples = [arrivals.first[b] - t for b, t in sent.items() if b in arrivals.first]
            return PushResult(len(sent), len(samples), arrivals.duplicates,
                              arrivals.batches, Latency.of(samples), Latency.of(calls))
    finally:
        dmq.stop()
        endpoint.shutdown()
        endpoint.server_close()
        serving.join(timeout=5)
        shutil.rmtree(data, ignore_errors=True)


def _wait(arrivals: _Arrivals, bodies: set[str]) -> None:
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        with arrivals.lock:
            if bodies <= set(arrivals.first):
                return
        time.sleep(0.01)


def table(result: PushResult, rate: float) -> str:
    """The figures as a Markdown table."""
    lat = result.latency
    return "\n".join([
        "Push delivery, send -> HTTP endpoint (standard queue, BatchSize 10, no window)",
        "",
        "| messages | rate/s | delivered | duplicates | batches | p50 ms | p99 ms | max ms "
        "| SendMessage p50 / p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {result.sent} | {rate:g} | {result.delivered} | {result.duplicates} | "
        f"{result.batches} | {lat.p50_ms} | {lat.p99_ms} | {lat.max_ms} | "
        f"{result.send.p50_ms} / {result.send.p99_ms} |",
    ])


def main(argv: Sequence[str] | None = None) -> PushResult:
    """Run once and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.push", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=None, help="default 1000")
    parser.add_argument("--rate", type=float, default=20.0, help="sends per second")
    parser.add_argument("--quick", action="store_true", help="100 messages")
    args = parser.parse_args(argv)
    messages = args.messages or (100 if args.quick else 1000)
    result = measure(messages, args.rate)
    print("\n" + table(result, args.rate) + "\n", flush=True)
    if result.delivered < result.sent:
        raise SystemExit(f"{result.sent - result.delivered} messages never arrived")
    return result


if __name__ == "__main__":
    main()
