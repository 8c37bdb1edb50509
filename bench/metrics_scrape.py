"""What `GET /metrics` scrapes cost with many queues, and what they cost other tenants.

    python -m bench.metrics_scrape --queues 10000

Starts DMQ in process on DynamoDB Local (a temporary data folder, the open mode), creates
the queues through the queue service (eight at a time), then scrapes `GET /metrics` over
HTTP, as Prometheus does (gzip accepted): once cold, three times in a row, and four
scrapers at once. Each figure is the wall
time and the CPU seconds DMQ and DynamoDB Local spent meanwhile (the server's work,
whichever process did it). Last, another tenant's SendMessage p50 alone and while four
scrapers scrape without pause.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import boto3

from app import app, runtime
from dmqlocal.runner import LocalDmq, LocalOptions

ACCOUNTS = 10  # the queues are spread over this many accounts
SENDS = 60


@dataclass(frozen=True)
class Cost:
    """Wall and CPU seconds of one piece of work."""

    wall_s: float
    cpu_s: float

    def line(self, label: str) -> str:
        """One line of the report."""
        return f"{label}: {self.wall_s * 1000:.1f} ms wall, {self.cpu_s:.2f} s CPU (DMQ + store)"


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(work: Callable[[], object], store_pid: int | None) -> Cost:
    """Run the work once; its wall time and the CPU both processes used meanwhile."""
    pids = [os.getpid(), *([store_pid] if store_pid else [])]
    before, start = sum(_cpu_of(p) for p in pids), time.perf_counter()
    work()
    return Cost(time.perf_counter() - start, sum(_cpu_of(p) for p in pids) - before)


def create_queues(count: int) -> float:
    """Create `count` queues (eight at a time); the seconds it took."""
    services = runtime.services_for()
    start = time.perf_counter()

    def create(i: int) -> None:
        services.queues.create(f"{100000000000 + i % ACCOUNTS}", services.region,
                               f"scrape-{i:06d}", {}, {})

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(create, range(count)))
    return time.perf_counter() - start


def _concurrent(work: Callable[[], object], workers: int) -> None:
    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def tenant_p50_ms(url: str) -> float:
    """Another tenant's SendMessage p50 over HTTP, in ms."""
    sqs = boto3.client("sqs", endpoint_url=url, region_name="us-east-1",
                       aws_access_key_id="999999999999", aws_secret_access_key="x")
    queue = sqs.create_queue(QueueName="other-tenant")["QueueUrl"]
    times = []
    for _ in range(SENDS):
        start = time.perf_counter()
        sqs.send_message(QueueUrl=queue, MessageBody="x")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def with_scrapers(scrape: Callable[[], object], work: Callable[[], float]) -> float:
    """`work()` while four scrapers scrape without pause."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            scrape()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        return work()
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def run(queues: int, data_dir: str) -> list[str]:
    """Start DMQ, create the queues, scrape; the report's lines."""
    local = LocalDmq(app, runtime, LocalOptions(port=0, data_dir=data_dir))
    url = local.start()
    try:
        store = local.store.dynamodb_local if local.store else None
        store_pid = store.pid if store is not None else None
        lines = [f"created {queues} queues in {create_queues(queues):.0f} s"]

        def scrape() -> bytes:  # as Prometheus scrapes: gzip accepted
            request = urllib.request.Request(f"{url}/metrics",
                                             headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(request, timeout=600) as reply:
                return bytes(reply.read())

        lines.append(measure(scrape, store_pid).line("first scrape"))
        repeated = [measure(scrape, store_pid) for _ in range(3)]
        lines.append(Cost(statistics.median(c.wall_s for c in repeated),
                          statistics.median(c.cpu_s for c in repeated)).line(
            "next three scrapes, median"))
        lines.append(measure(lambda: _concurrent(scrape, 4), store_pid).line(
            "four scrapes at once"))
        lines.append(f"another tenant's SendMessage p50: {tenant_p50_ms(url):.1f} ms alone, "
                     f"{with_scrapers(scrape, lambda: tenant_p50_ms(url)):.1f} ms with four "
                     "scrapers scraping without pause")
        if local.metrics is not None:
            lines.append(f"renderings of the exposition: {local.metrics.renders}")
        return lines
    finally:
        local.stop()


def main(argv: list[str] | None = None) -> int:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queues", type=int, default=10_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dmq-bench-metrics-") as data_dir:
        for line in run(args.queues, data_dir):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
