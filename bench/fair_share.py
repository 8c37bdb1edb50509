"""Fair share: one tenant's SendMessage latency while another tenant floods the server.

One `python -m dmqlocal` with DMQ_AUTH=required and its default fair share (each account's
request rate and concurrency share, docs/throttling.md), on DynamoDB Local. Two tenants
with keys of their own: the quiet one sends one message at a time and times each send;
the flooder runs `--threads` threads in a process of its own, each calling SendMessage as
fast as the server answers, with no retries and no backoff (what a hostile client does).
The quiet tenant's p50 is measured without the flood (the baseline), then during it.

    python -m bench.fair_share            # 400 timed sends each way
    python -m bench.fair_share --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import Server, start_dmq, wait_idle
from bench.timing import Latency, Recorder
from dmqcli.admin_api import AdminApi

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "bench-fair-share.json"
ROOT_KEY, ROOT_SECRET = "AKIAFAIRFAIRFAIRFAIR", "fair-share-root-secret-fair-share-root-0"
QUIET, FLOODER = "111111111111", "222222222222"
SEND = "SendMessage"


@dataclass(frozen=True)
class FloodCounts:
    """What the flooder's requests got, per second of the flood."""

    served_per_s: float
    refused_per_s: float
    failed_per_s: float


@dataclass(frozen=True)
class FairShareResult:
    """The quiet tenant's sends alone and under the flood."""

    threads: int
    baseline: Latency
    flooded: Latency
    flood: FloodCounts
    ratio_p50: float
    server_env: dict[str, str]


def client(endpoint: str, key: str, secret: str, attempts: int = 3,
           pool: int = 10) -> Any:
    """A boto3 SQS client of one tenant (`attempts` 1: no retries at all)."""
    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts},
                      max_pool_connections=pool, connect_timeout=5, read_timeout=60))


def tenant_keys(endpoint: str) -> dict[str, tuple[str, str]]:
    """A key pair for each tenant, made with the admin API (signed with the root key)."""
    admin = AdminApi(endpoint, "us-east-1", Credentials(ROOT_KEY, ROOT_SECRET))
    keys = {}
    for account in (QUIET, FLOODER):
        made = admin.post("/admin/keys", {"account": account})
        keys[account] = (made["accessKeyId"], made["secretAccessKey"])
    return keys


def start(extra_env: dict[str, str] | None = None) -> tuple[Server, Path]:
    """A required-mode server on a fresh data folder, answering."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-fair-share-"))
    env = {"DMQ_AUTH": "required", "DMQ_ROOT_ACCESS_KEY_ID": ROOT_KEY,
           "DMQ_ROOT_SECRET_ACCESS_KEY": ROOT_SECRET, **(extra_env or {})}
    server = start_dmq(data_dir, extra_env=env)
    sqs = client(server.url, ROOT_KEY, ROOT_SECRET, attempts=1)
    deadline = time.monotonic() + 120
    while True:
        try:
            sqs.list_queues()
            return server, data_dir
        except (BotoCoreError, ClientError):
            if time.monotonic() > deadline or server.process.poll() is not None:
                server.stop()
                raise RuntimeError("DMQ did not start:\n" + "".join(server.tail)) from None
            time.sleep(0.2)


def flood(endpoint: str, key: str, secret: str, url: str, threads: int, seconds: float,
          results: Any) -> None:
    """The flooder (run in a process of its own): `threads` threads sending without pause
    or retries for `seconds`; puts (served, refused, failed) on `results`."""
    sqs = client(endpoint, key, secret, attempts=1, pool=threads)
    counts = [0, 0, 0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def run() -> None:
        while time.monotonic() < stop_at:
            try:
                sqs.send_message(QueueUrl=url, MessageBody="flood")
                slot = 0
            except ClientError as exc:
                slot = 1 if exc.response["Error"]["Code"] == "RequestThrottled" else 2
            except BotoCoreError:
                slot = 2
            with lock:
                counts[slot] += 1

    workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 70)
    results.put(tuple(counts))


def timed_sends(sqs: Any, url: str, calls: int, pause_s: float = 0.01) -> Latency:
    """`calls` SendMessage calls one at a time, a short pause between them."""
    recorder = Recorder()
    for number in range(calls):
        with recorder.timed(SEND):
            sqs.send_message(QueueUrl=url, MessageBody=f"quiet-{number:06d}")
        time.sleep(pause_s)
    return recorder.summary(SEND)


def measure(calls: int, threads: int, extra_env: dict[str, str] | None = None) -> FairShareResult:
    """The quiet tenant's p50 alone, then while the flooder floods."""
    server, data_dir = start(extra_env)
    try:
        keys = tenant_keys(server.url)
        quiet = client(server.url, *keys[QUIET])
        quiet_url = quiet.create_queue(QueueName="quiet")["QueueUrl"]
        flood_url = client(server.url, *keys[FLOODER]).create_queue(
            QueueName="flood")["QueueUrl"]
        timed_sends(quiet, quiet_url, min(50, calls))  # warm connections and caches
        wait_idle(server.process.pid, timeout_s=30)
        baseline = timed_sends(quiet, quiet_url, calls)
        flooded, counts, seconds = _under_flood(server.url, keys[FLOODER], flood_url, quiet,
                                                quiet_url, calls, threads)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    ratio = round(flooded.p50_ms / baseline.p50_ms, 2) if baseline.p50_ms else 0.0
    per_s = FloodCounts(*(round(n / seconds, 1) for n in counts))
    return FairShareResult(threads, baseline, flooded, per_s, ratio, dict(extra_env or {}))


def _under_flood(endpoint: str, key: tuple[str, str], flood_url: str, quiet: Any,
                 quiet_url: str, calls: int,
                 threads: int) -> tuple[Latency, tuple[int, int, int], float]:
    """Start the flood, let it ramp up, time the quiet sends inside it."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    # Long enough for the quiet sends even if each slows to 100 ms (the flood stops then).
    seconds = 6.0 + calls * 0.12
    flooder = context.Process(target=flood, args=(endpoint, *key, flood_url, threads,
                                                  seconds, results), daemon=True)
    flooder.start()
    try:
        time.sleep(4.0)  # the flooder's interpreter starts, then it floods
        flooded = timed_sends(quiet, quiet_url, calls)
        counts = results.get(timeout=seconds + 120)
    finally:
        flooder.join(timeout=10)
        if flooder.is_alive():
            flooder.kill()
    return flooded, counts, seconds - 2.0  # the flood itself, less its start


def markdown(result: FairShareResult) -> str:
    """The figures as a Markdown table."""
    env = ", ".join(f"{k}={v}" for k, v in result.server_env.items()) or "defaults"
    flood = result.flood
    return "\n".join([
        f"Fair share (DMQ_AUTH=required, {env}): the quiet tenant's SendMessage while "
        f"another floods with {result.threads} threads", "",
        "| quiet tenant | p50 ms | p99 ms |", "|---|---|---|",
        f"| alone | {result.baseline.p50_ms} | {result.baseline.p99_ms} |",
        f"| under the flood | {result.flooded.p50_ms} | {result.flooded.p99_ms} |", "",
        f"p50 ratio {result.ratio_p50}x. The flood, per second: {flood.served_per_s} served, "
        f"{flood.refused_per_s} refused (RequestThrottled), {flood.failed_per_s} failed."])


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.fair_share", description=__doc__)
    parser.add_argument("--calls", type=int, default=None, help="default 400; quick 60")
    parser.add_argument("--threads", type=int, default=8, help="the flooder's threads")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the server (repeatable)")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.env)
    result = measure(args.calls or (60 if args.quick else 400), args.threads, extra)
    print("\n" + markdown(result) + "\n", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(asdict(result), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
