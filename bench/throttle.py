"""Throttling across processes: several `python -m dmqlocal` servers over one DynamoDB
Local share one configured rate, through leases on the buckets in the control table.

Client threads (a few per server, no SDK retries) call ListQueueTags as fast as they are
let through, pausing briefly after each RequestThrottled, so the offered load is well over
the rate. The achieved rate is what was served in a measuring window that opens a second
after the first RequestThrottled, once the buckets' initial burst is spent and the leases
taken meanwhile are gone (or after a warm-up if none comes). Two runs on one fleet:

1. one queue, limited by its queue bucket (`DMQ_THROTTLE_QUEUE_RPS`);
2. many queues, each under its own rate, limited together by the account bucket
   (`DMQ_THROTTLE_ACCOUNT_RPS`).

    python -m bench.throttle            # 4 servers, 8 s windows
    python -m bench.throttle --quick    # 4 servers, 3 s windows
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import Server, start_dmq, stop_like_ctrl_c
from bench.sqs import sqs_client
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal

FULL = {"servers": 4, "threads": 4, "queue_rate": 20.0, "account_rate": 30.0,
        "seconds": 8.0, "warmup": 10.0}
QUICK = {"servers": 4, "threads": 3, "queue_rate": 10.0, "account_rate": 20.0,
         "seconds": 3.0, "warmup": 6.0}
# A client thread waits this long after a RequestThrottled before it asks again.
PAUSE_S = 0.02
# The window opens this long after the first RequestThrottled: by then every lease taken
# while the initial burst was spent has been served or has expired (leases live 1 s).
SETTLE_S = 1.0
# Queues of the account run: enough that their queue buckets together exceed the account's.
ACCOUNT_QUEUES = 8


@dataclass(frozen=True)
class RateResult:
    """One run: the rate configured and the rate served in the measuring window."""

    name: str
    configured: float
    served: int
    throttled: int
    other_errors: int
    window_s: float
    per_server: tuple[int, ...]  # requests each server served in the window

    @property
    def servers(self) -> int:
        """How many servers shared the rate."""
        return len(self.per_server)

    @property
    def achieved(self) -> float:
        """Requests served per second in the window."""
        return self.served / self.window_s

    @property
    def offered(self) -> float:
        """Requests answered (served or throttled) per second in the window."""
        return (self.served + self.throttled) / self.window_s

    @property
    def deviation(self) -> float:
        """(achieved - configured) / configured."""
        return self.achieved / self.configured - 1.0

    def line(self) -> str:
        """The run as one printed line."""
        return (f"throttle {self.name}: configured {self.configured:g}/s, achieved "
                f"{self.achieved:.1f}/s ({self.deviation:+.1%}) by {self.servers} servers over "
                f"{self.window_s:g} s, offered {self.offered:.1f}/s; {self.throttled} "
                f"throttled answers, "
                f"{self.other_errors} other errors" + (
                    "" if self.offered > self.configured * 1.1 else
                    " (the clients offered barely more than the rate: the figure measures "
                    "them, not the throttle)"))


@contextlib.contextmanager
def fleet(count: int, env: dict[str, str], data_root: Path) -> Iterator[list[Server]]:
    """`count` DMQ servers over one in-memory DynamoDB Local, stopped (and the store) at
    the end. They share one key file for encryption at rest, as servers over one store
    must (docs/encryption.md), so each reads what the others sent."""
    store = DynamoDBLocal(None)
    stop_like_ctrl_c()
    endpoint = store.start()
    servers: list[Server] = []
    try:
        for n in range(count):
            servers.append(start_dmq(data_root / f"server-{n}", extra_env={
                "DMQ_DYNAMODB_ENDPOINT": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "DMQ_SSE_KEY_FILE": str(data_root / "sse.key"), **env}))
        for server in servers:
            server.wait_answering()
        yield servers
    finally:
        for server in servers:
            server.stop()
        store.stop()


class _Load:
    """The answers of one run, and its window: it opens SETTLE_S after the first
    RequestThrottled, or `warmup` seconds after the start if none came by then, and lasts
    `seconds`."""

    def __init__(self, queue_urls: Sequence[str], seconds: float, warmup: float) -> None:
        self.queue_urls = list(queue_urls)
        self.seconds = seconds
        self.warmup = warmup
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.opened: float | None = None
        self.served: list[tuple[float, int]] = []  # (answered at, server)
        self.throttled: list[float] = []
        self.other: list[float] = []

    def window(self, now: float, throttled: bool = False) -> float | None:
        """When the window opened (opening it now if due), or None while it is not open."""
        with self.lock:
            if self.opened is None and throttled:
                self.opened = now + SETTLE_S
            elif self.opened is None and now >= self.start + self.warmup:
                self.opened = now
            return self.opened

    def worker(self, sqs: Any, server: int, first: int) -> None:
        """Call ListQueueTags round the queues until the window has closed."""
        n = first
        while True:
            now = time.monotonic()
            began = self.window(now)
            if began is not None and now >= began + self.seconds:  # past the window's end
                return
            n += 1
            try:
                sqs.list_queue_tags(QueueUrl=self.queue_urls[n % len(self.queue_urls)])
                with self.lock:
                    self.served.append((time.monotonic(), server))
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "RequestThrottled":
                    with self.lock:
                        self.other.append(now)
                    continue
                self.window(now, throttled=True)
                with self.lock:
                    self.throttled.append(time.monotonic())
                time.sleep(PAUSE_S)
            except BotoCoreError:
                with self.lock:
                    self.other.append(now)

    def result(self, name: str, configured: float, servers: int) -> RateResult:
        """What was answered inside the window."""
        began = self.opened if self.opened is not None else self.start + self.warmup

        def inside(at: float) -> bool:
            return began <= at < began + self.seconds

        per_server = [0] * servers
        for at, server in self.served:
            per_server[server] += inside(at)
        return RateResult(name, configured, sum(per_server), sum(map(inside, self.throttled)),
                          sum(map(inside, self.other)), self.seconds, tuple(per_server))


def measure(endpoints: Sequence[str], queue_urls: Sequence[str], configured: float,
            seconds: float, warmup: float, threads: int, name: str) -> RateResult:
    """Hammer the queues through every endpoint, `threads` clients each; the rate served
    in a window of `seconds` that opens once the buckets' initial burst is spent."""
    # Each thread a client of its own (made before the clock starts), spread over the queues.
    clients = [(sqs_client(endpoint, 1, read_timeout=10, attempts=1), server, server + t * 3)
               for server, endpoint in enumerate(endpoints) for t in range(threads)]
    load = _Load(queue_urls, seconds, warmup)
    workers = [threading.Thread(target=load.worker, args=client, name=f"throttle-{n}")
               for n, client in enumerate(clients)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=warmup + seconds + 30)
    return load.result(name, configured, len(endpoints))


def run(servers: int, threads: int, queue_rate: float, account_rate: float, seconds: float,
        warmup: float) -> list[RateResult]:
    """Both runs on one fleet of servers."""
    data_root = Path(tempfile.mkdtemp(prefix="dmq-bench-throttle-"))
    env = {"DMQ_THROTTLE_QUEUE_RPS": f"{queue_rate:g}",
           "DMQ_THROTTLE_ACCOUNT_RPS": f"{account_rate:g}"}
    try:
        with fleet(servers, env, data_root) as running:
            endpoints = [s.url for s in running]
            admin = sqs_client(endpoints[0], 1, read_timeout=10, attempts=10)
            urls = [admin.create_queue(QueueName=f"throttled-{n}")["QueueUrl"]
                    for n in range(ACCOUNT_QUEUES)]
            time.sleep(1.0)  # the account bucket refills from the creates
            one = measure(endpoints, urls[:1], queue_rate, seconds, warmup, threads,
                          "per queue (one queue)")
            every = measure(endpoints, urls, account_rate, seconds, warmup, threads,
                            f"per account ({ACCOUNT_QUEUES} queues)")
            return [one, every]
    finally:
        shutil.rmtree(data_root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the achieved rates against the configured ones."""
    parser = argparse.ArgumentParser(prog="python -m bench.throttle", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for key, value in FULL.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=None,
                            help=f"default {value!r}; quick {QUICK[key]!r}")
    parser.add_argument("--quick", action="store_true", help="a short run")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL

    def size(key: str) -> float:
        given = getattr(args, key)
        return float(given if given is not None else sizes[key])

    results = run(int(size("servers")), int(size("threads")), size("queue_rate"),
                  size("account_rate"), size("seconds"), size("warmup"))
    print("\nThrottling across processes (configured vs achieved):", flush=True)
    for result in results:
        print("  " + result.line(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
