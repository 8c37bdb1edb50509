"""What request deduplication and TLS cost a send: SendMessage and SendMessageBatch (10
entries) latency, p50 and p99, and DynamoDB requests per call, against the real local
server on DynamoDB Local, three servers one after the other:

1. request deduplication on (the default), over HTTP;
2. request deduplication off (`DMQ_REQUEST_DEDUP=off`), over HTTP;
3. request deduplication on, over HTTPS (`DMQ_TLS=1`, a generated certificate; a client
   keeps its connection, so the handshake is paid once).

    python -m bench.request_dedup            # 300 calls of each kind per server
    python -m bench.request_dedup --quick    # 30
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.counting import RemoteCounter
from bench.servers import START_TIMEOUT_S, start_dmq

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "bench-request-dedup.json"
BODY = "x" * 1024


@dataclass
class Run:
    """The figures of one server."""

    name: str
    send_p50_ms: float
    send_p99_ms: float
    batch_p50_ms: float
    batch_p99_ms: float
    dynamodb_requests_per_send: float | None
    dynamodb_requests_per_batch: float | None


def _client(endpoint: str, verify: str | None) -> Any:
    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="dmq-bench", aws_secret_access_key="dmq-bench", verify=verify,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5,
                      read_timeout=60))


def _wait(sqs: Any, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sqs.list_queues()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _timed(calls: int, call: Callable[[], Any]) -> tuple[float, float]:
    """p50 and p99 of `calls` calls, in ms."""
    took = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        took.append((time.perf_counter() - start) * 1000)
    took.sort()
    return round(statistics.median(took), 2), round(took[min(len(took) - 1,
                                                              int(len(took) * 0.99))], 2)


def _per_call(counter: RemoteCounter | None, calls: int, run: Callable[[], Any]) -> float | None:
    if counter is None:
        run()
        return None
    before = counter.snapshot()
    run()
    return round((counter.snapshot() - before).total_calls / calls, 2)


def measure(name: str, calls: int, env: dict[str, str], tls: bool) -> Run:
    """Start a server with `env`, time its sends, stop it."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-dedup-"))
    dmq = start_dmq(data_dir, extra_env=env)
    try:
        scheme = "https" if tls else "http"
        sqs = _client(f"{scheme}://127.0.0.1:{dmq.port}",
                      str(data_dir / "tls" / "ca.pem") if tls else None)
        _wait(sqs)
        slug = "".join(c if c.isalnum() else "-" for c in name)
        url = sqs.create_queue(QueueName=f"bench-dedup-{slug}")["QueueUrl"]
        counter = None if tls else RemoteCounter(dmq.url)
        entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
        for _ in range(10):  # warm up: connections, caches
            sqs.send_message(QueueUrl=url, MessageBody=BODY)
        send: list[tuple[float, float]] = []
        batch: list[tuple[float, float]] = []
        per_send = _per_call(counter, calls, lambda: send.append(_timed(
            calls, lambda: sqs.send_message(QueueUrl=url, MessageBody=BODY))))
        per_batch = _per_call(counter, calls, lambda: batch.append(_timed(
            calls, lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries))))
        return Run(name, *send[0], *batch[0], per_send, per_batch)
    finally:
        dmq.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def markdown(runs: Sequence[Run]) -> str:
    """The figures as a Markdown table."""
    lines = ["| server | SendMessage p50 / p99 ms | SendMessageBatch(10) p50 / p99 ms "
             "| DynamoDB requests per send / per batch |", "|---|---|---|---|"]
    for r in runs:
        counts = ("-" if r.dynamodb_requests_per_send is None else
                  f"{r.dynamodb_requests_per_send:g} / {r.dynamodb_requests_per_batch:g}")
        lines.append(f"| {r.name} | {r.send_p50_ms:g} / {r.send_p99_ms:g} | "
                     f"{r.batch_p50_ms:g} / {r.batch_p99_ms:g} | {counts} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three servers, print the table, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.request_dedup", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="30 calls of each kind")
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT))
    args = parser.parse_args(argv)
    calls = args.calls or (30 if args.quick else 300)
    runs = [
        measure("dedup on, HTTP", calls, {}, tls=False),
        measure("dedup off, HTTP", calls, {"DMQ_REQUEST_DEDUP": "off"}, tls=False),
        measure("dedup on, HTTPS", calls, {"DMQ_TLS": "1"}, tls=True),
    ]
    table = markdown(runs)
    print(f"\nRequest deduplication and TLS, {calls} calls of each kind:\n\n{table}\n",
          flush=True)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
