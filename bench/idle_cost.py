"""What an idle DMQ costs its store, and how fast it wakes up.

DynamoDB Local runs behind a counting proxy (`bench/store_proxy.py`) and DMQ's local
server is pointed at the proxy, so every store request it makes is counted, whichever
client made it: the request path's, PynamoDB's, the stream pump's, the timers'. After a
few queues, sends and deletes, and a settle, the requests of a quiet window are counted
(target: at most 2 per second). Then, after a longer idle spell, one message is sent and
the time until the pump's first GetRecords that returns a record is the wake-up delay.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.servers import Server, start_dmq, stop_like_ctrl_c
from bench.sqs import sqs_client
from bench.store_proxy import CountingProxy
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY, DynamoDBLocal

TARGET_PER_S = 2.0
SETTLE_S = 8.0  # after the last request: the pump's backoff reaches its cap well before


@dataclass(frozen=True)
class IdleCost:
    """Store requests per second of an idle server, by operation, and the wake-up delay."""

    window_s: float
    requests: int
    by_operation: dict[str, int]
    wake_s: float | None  # None: not measured, or the pump never saw the message
    idle_before_wake_s: float

    @property
    def per_second(self) -> float:
        """Store requests per second over the window."""
        return self.requests / self.window_s if self.window_s else 0.0


class IdleServer:
    """DynamoDB Local, the counting proxy in front of it, and DMQ on the proxy.

    `on_disk` keeps the store's database in the temporary folder, as `make run` does
    (otherwise in memory)."""

    def __init__(self, on_disk: bool = False, env: dict[str, str] | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="dmq-idle-"))
        self.store = DynamoDBLocal(self.folder / "dynamodb" if on_disk else None)
        self.proxy: CountingProxy | None = None
        self.dmq: Server | None = None
        self.env = dict(env or {})  # DMQ's own settings besides the store's

    def start(self) -> IdleServer:
        """Start all three; the DMQ server answers when this returns."""
        stop_like_ctrl_c()
        self.proxy = CountingProxy(self.store.start()).start()
        self.start_dmq()
        return self

    def start_dmq(self, counted: bool = True, self_counting: bool = False) -> Server:
        """(Re)start DMQ on the same data folder, on the proxy (`counted`) or on the store
        itself with default settings (its own request counting off too, unless
        `self_counting`: `GET /_dmq/dynamodb-calls`); it answers when this returns."""
        assert self.proxy is not None
        if self.dmq is not None:
            self.dmq.stop()
        extra = {**self.env, "DMQ_DYNAMODB_ENDPOINT": self.proxy.endpoint if counted else
                 self.store.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                 "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        if not counted:
            extra["DMQ_COUNT_DYNAMODB"] = "1" if self_counting else "0"
        self.dmq = start_dmq(self.folder / "data", extra_env=extra)
        self.dmq.wait_answering()
        return self.dmq

    def stop(self) -> None:
        """Stop DMQ, the proxy and DynamoDB Local; remove the folder."""
        if self.dmq is not None:
            self.dmq.stop()
        if self.proxy is not None:
            self.proxy.stop()
        self.store.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def exercise(endpoint: str, queues: int = 3, messages: int = 5) -> list[str]:
    """Create a few queues, send a few messages to each, receive and delete them."""
    sqs = sqs_client(endpoint)
    urls = []
    for n in range(queues):
        url = sqs.create_queue(QueueName=f"dmq-idle-{n}")["QueueUrl"]
        urls.append(url)
        for i in range(messages):
            sqs.send_message(QueueUrl=url, MessageBody=f"idle-{n}-{i}")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return urls


def measure(server: IdleServer, window_s: float = 10.0, idle_s: float = 30.0) -> IdleCost:
    """Exercise, settle, count a quiet window; then, once the server has been quiet for
    `idle_s` seconds (or the window's end, if later; 0: skip it), send once and time the
    pump's first read of the record."""
    assert server.dmq is not None and server.proxy is not None
    urls = exercise(server.dmq.url)
    quiet_from = time.monotonic()
    time.sleep(SETTLE_S)
    start = time.monotonic()
    time.sleep(window_s)
    end = time.monotonic()
    counts = server.proxy.by_operation(start, end)
    wake_s: float | None = None
    sent = quiet_from
    if idle_s > 0:
        time.sleep(max(0.0, quiet_from + idle_s - time.monotonic()))
        sent = time.monotonic()
        sqs_client(server.dmq.url).send_message(QueueUrl=urls[0], MessageBody="after idle")
        deadline = sent + 30.0
        while wake_s is None and time.monotonic() < deadline:
            seen = server.proxy.first_records_after(sent)
            wake_s = None if seen is None else seen - sent
            time.sleep(0.02)
    return IdleCost(round(end - start, 2), sum(counts.values()), counts,
                    None if wake_s is None else round(wake_s, 3),
                    round(sent - quiet_from, 1))


def report(cost: IdleCost) -> str:
    """The figure as a Markdown table."""
    operations = ", ".join(f"{k} {v}" for k, v in cost.by_operation.items()) or "none"
    wake = "not measured" if cost.wake_s is None else f"{cost.wake_s:.2f} s"
    return "\n".join([
        "| Idle cost | Figure | Target |",
        "|---|---|---|",
        f"| store requests per second, idle ({cost.window_s:g} s window) | "
        f"{cost.per_second:.2f} ({operations}) | <= {TARGET_PER_S:g} |",
        f"| a send after {cost.idle_before_wake_s:g} s idle until the pump reads it | "
        f"{wake} | < 2 s |",
    ])


def main(argv: Sequence[str] | None = None) -> IdleCost:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.idle_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=float, default=60.0,
                        help="seconds counted idle (a minute includes the minute timers)")
    parser.add_argument("--idle", type=float, default=30.0,
                        help="seconds idle before the wake-up send (0 skips it)")
    parser.add_argument("--quick", action="store_true", help="a 5 s window, 12 s idle")
    args = parser.parse_args(argv)
    window, idle = (5.0, 12.0) if args.quick else (args.window, args.idle)
    print("idle cost: DMQ behind a counting proxy ...", flush=True)
    server = IdleServer()
    try:
        server.start()
        cost = measure(server, window, idle)
    finally:
        server.stop()
    print("\n" + report(cost) + "\n", flush=True)
    return cost


if __name__ == "__main__":
    main()
