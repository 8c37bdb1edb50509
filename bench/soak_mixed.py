"""The mixed soak (part of `make soak`): many queues, many waiting consumers, a steady
stream of messages, for ten minutes. Is anything lost, does anything fail, do latency and
memory stay flat?

    python -m bench.soak_mixed [--duration 600] [--queues 10000] [--consumers 500]
                               [--rate 200]

DynamoDB Local, with DMQ's local server on it (`bench/idle_cost.py`'s `IdleServer`).
`--queues` queues are copied straight into the queues table (`bench/many_queues.py`), as a
deployment that has grown to that size holds them. `--consumers` consumers each long-poll
a queue of their own (WaitTimeSeconds=20, up to ten messages) and delete what they get in
one batch; `--producers` threads send `--rate` messages a second between them, one
SendMessage each on its own schedule, spread over the consumers' queues. The load
generator shares the server's 2 cores, so by default its calls go through the lean client
(`bench.sqs.lean_sqs_client`: signed SQS JSON-protocol requests over HTTP, about 0.2 ms
of client CPU a call); `--client boto3` drives it with boto3's SQS client instead, which
spends about 0.8 ms of CPU a call, a fifth of this machine at the target rate. Every 10 s a
sample records the window's SendMessage and send-to-receipt latencies and the resident
memory of DMQ and of DynamoDB Local. At the end the producers stop and the consumers
drain: every message sent must have been received.

Targets: the rate kept, 0 lost, 0 answers of 500 or more, p99 of the last window at most
1.5x the first (SendMessage and send-to-receipt), DMQ's memory after the warm-up growing
by less than 10%.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from bench.counting import RemoteCounter
from bench.idle_cost import IdleServer
from bench.many_queues import copy_queues
from bench.servers import tree_rss_mib
from bench.soak_report import P99_RATIO, RSS_GROWTH
from bench.sqs import LEAN_SQS_CALLS, lean_sqs_client, sqs_client
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "000000000000"
SEND, RECEIPT = "SendMessage", "send-to-receipt"
WAIT_S = 20
DRAIN_S = 60.0
WINDOW_SHARE = 0.2  # the first and last windows compared: a fifth of the run each
WARM_UP_SHARE = 0.2
RATE_SHARE = 0.95  # the rate counts as kept at 95% of it (the producers' start and end)
LEAN_CALLS = {**LEAN_SQS_CALLS, "delete_message_batch": "DeleteMessageBatch"}


@dataclass(frozen=True)
class MixedSample:
    """One sampling window."""

    at_s: float
    send_p99_ms: float
    receipt_p99_ms: float
    dmq_rss_mib: float
    store_rss_mib: float
    sent: int
    received: int


@dataclass
class MixedFigures:
    """The run's samples, totals and verdict."""

    duration_s: float
    queues: int
    consumers: int
    rate: float
    samples: list[MixedSample] = field(default_factory=list)
    sent: int = 0
    received: int = 0
    lost: int = 0
    duplicates: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    first_p99_ms: dict[str, float] = field(default_factory=dict)
    last_p99_ms: dict[str, float] = field(default_factory=dict)
    rss_growth: float = 0.0
    verdict: dict[str, bool] = field(default_factory=dict)
    # DMQ's store requests while the producers ran, by operation (`--count-store`)
    store_calls: dict[str, int] = field(default_factory=dict)

    @property
    def server_errors(self) -> int:
        return sum(n for code, n in self.errors.items() if code.startswith("5"))


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        error = exc.response.get("Error", {})
        code = f"{status} {error.get('Code', '')}"
        # a server error says which part refused (the breaker, the store, the cap)
        return f"{code} ({error.get('Message', '')})" if status >= 500 else code
    return f"599 {type(exc).__name__}"


class _Mixed:
    """The producers' and consumers' shared state."""

    def __init__(self, endpoint: str, urls: list[str], rate: float, producers: int,
                 client: str = "lean") -> None:
        self.urls = urls
        self.rate = rate
        self.producers = producers
        self.producing = threading.Event()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.sent_at: dict[int, float] = {}  # message number -> when its send began
        self.received: Counter[int] = Counter()
        self.calls: list[tuple[float, str, float]] = []  # (at, what, ms)
        self.errors: Counter[str] = Counter()
        if client == "boto3":
            self.consumer_sqs = sqs_client(endpoint, len(urls) + 10,
                                           read_timeout=WAIT_S + 30, attempts=1)
            self.producer_sqs = sqs_client(endpoint, producers + 2, attempts=1)
        else:
            self.consumer_sqs = lean_sqs_client(endpoint, WAIT_S + 30, len(urls) + 10,
                                                LEAN_CALLS)
            self.producer_sqs = lean_sqs_client(endpoint, 30, producers + 2, LEAN_CALLS)

    def _failed(self, exc: Exception) -> None:
        with self.lock:
            self.errors[_code(exc)] += 1

    def produce(self, number: int) -> None:
        gap = self.producers / self.rate
        next_at = time.monotonic()
        k = number
        while self.producing.is_set():
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += gap
            began = time.monotonic()
            try:
                self.producer_sqs.send_message(QueueUrl=self.urls[k % len(self.urls)],
                                               MessageBody=str(k))
            except (BotoCoreError, ClientError) as exc:
                self._failed(exc)
                k += self.producers
                continue
            now = time.monotonic()
            with self.lock:
                self.sent_at[k] = began
                self.calls.append((began - self.started, SEND, (now - began) * 1000))
            k += self.producers

    def consume(self, url: str) -> None:
        while not self.stop.is_set():
            try:
                got = self.consumer_sqs.receive_message(
                    QueueUrl=url, WaitTimeSeconds=WAIT_S, MaxNumberOfMessages=10)
            except (BotoCoreError, ClientError) as exc:
                self._failed(exc)
                time.sleep(0.5)
                continue
            messages = got.get("Messages", [])
            now = time.monotonic()
            with self.lock:
                for message in messages:
                    k = int(message["Body"])
                    self.received[k] += 1
                    began = self.sent_at.get(k)
                    if began is not None:
                        self.calls.append((began - self.started, RECEIPT, (now - began) * 1000))
            if messages:
                try:
                    self.consumer_sqs.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                        for n, m in enumerate(messages)])
                except (BotoCoreError, ClientError) as exc:
                    self._failed(exc)

    def window(self, start: float, end: float, what: str) -> float:
        with self.lock:
            picked = [ms for at, w, ms in self.calls if w == what and start <= at < end]
        return round(percentile(picked, 99), 1)


def _drive(server: IdleServer, args: argparse.Namespace) -> MixedFigures:
    assert server.dmq is not None
    endpoint = server.dmq.url
    sqs_client(endpoint).create_queue(QueueName="mixed-template")
    copy_queues(server.store.endpoint, f"{ACCOUNT}/mixed-template", args.queues - 1,
                lambda n: (ACCOUNT, f"mixed-{n:06d}"))
    urls = [f"{endpoint}/{ACCOUNT}/mixed-{n:06d}" for n in range(args.consumers)]
    mixed = _Mixed(endpoint, urls, args.rate, args.producers, args.client)
    consumers = [threading.Thread(target=mixed.consume, args=(u,), daemon=True) for u in urls]
    for thread in consumers:
        thread.start()
    time.sleep(5.0)  # the polls are open
    mixed.started = time.monotonic()
    mixed.producing.set()
    producers = [threading.Thread(target=mixed.produce, args=(n,), daemon=True)
                 for n in range(args.producers)]
    for thread in producers:
        thread.start()
    figures = MixedFigures(args.duration, args.queues, args.consumers, args.rate)
    dmq_pid, store_pid = server.dmq.process.pid, server.store.pid
    counter = RemoteCounter(endpoint) if args.count_store else None
    counted_from = counter.snapshot() if counter is not None else None
    try:
        ends = mixed.started + args.duration
        while (left := ends - time.monotonic()) > 0:
            time.sleep(min(args.interval, left))
            at = time.monotonic() - mixed.started
            with mixed.lock:
                sent, received = len(mixed.sent_at), sum(mixed.received.values())
            sample = MixedSample(
                round(at, 1), mixed.window(at - args.interval, at, SEND),
                mixed.window(at - args.interval, at, RECEIPT), tree_rss_mib(dmq_pid),
                tree_rss_mib(store_pid) if store_pid else 0.0, sent, received)
            figures.samples.append(sample)
            print(f"{sample.at_s:7.1f} s  p99 ms: send {sample.send_p99_ms:.0f}, receipt "
                  f"{sample.receipt_p99_ms:.0f}; RSS DMQ {sample.dmq_rss_mib:.0f} MiB, store "
                  f"{sample.store_rss_mib:.0f} MiB; sent {sent:,}, received {received:,}",
                  flush=True)
    finally:
        mixed.producing.clear()
        for thread in producers:
            thread.join(timeout=10)
        if counter is not None and counted_from is not None:
            figures.store_calls = (counter.snapshot() - counted_from).calls
        drain_until = time.monotonic() + DRAIN_S
        while time.monotonic() < drain_until:
            with mixed.lock:
                if all(mixed.received[k] for k in mixed.sent_at):
                    break
            time.sleep(0.5)
        mixed.stop.set()
    return _judge(figures, mixed)


def _judge(figures: MixedFigures, mixed: _Mixed) -> MixedFigures:
    end = figures.duration_s
    window = end * WINDOW_SHARE
    with mixed.lock:
        figures.sent = len(mixed.sent_at)
        figures.received = sum(1 for k in mixed.sent_at if mixed.received[k])
        figures.lost = figures.sent - figures.received
        figures.duplicates = sum(n - 1 for n in mixed.received.values() if n > 1)
        figures.errors = dict(mixed.errors)
    for what in (SEND, RECEIPT):
        figures.first_p99_ms[what] = mixed.window(0, window, what)
        figures.last_p99_ms[what] = mixed.window(end - window, end + 1, what)
    warm = [s for s in figures.samples if s.at_s >= end * WARM_UP_SHARE] or figures.samples
    if warm and warm[0].dmq_rss_mib:
        figures.rss_growth = round((warm[-1].dmq_rss_mib - warm[0].dmq_rss_mib)
                                   / warm[0].dmq_rss_mib, 4)
    figures.verdict = {
        "rate": figures.sent >= RATE_SHARE * figures.rate * figures.duration_s,
        "lost": figures.lost == 0,
        "5xx": figures.server_errors == 0,
        # each latency judged on its own (one verdict for both showed a flat one as FAIL)
        "send flat": _flat(figures, SEND),
        "receipt flat": _flat(figures, RECEIPT),
        "memory flat": figures.rss_growth < RSS_GROWTH,
    }
    return figures


def _flat(figures: MixedFigures, what: str) -> bool:
    """The last fifth's p99 of `what` within P99_RATIO of the first fifth's."""
    first = figures.first_p99_ms[what]
    return not first or figures.last_p99_ms[what] <= P99_RATIO * first


def markdown(f: MixedFigures) -> str:
    """The figures as a Markdown table, each against its target."""
    def row(what: str, figure: str, target: str, ok: bool) -> str:
        return f"| {what} | {figure} | {target} | {'PASS' if ok else 'FAIL'} |"

    errors = ", ".join(f"{k}: {v}" for k, v in sorted(f.errors.items())) or "none"
    first, last = f.first_p99_ms, f.last_p99_ms
    dmq = [s.dmq_rss_mib for s in f.samples]
    store = [s.store_rss_mib for s in f.samples]
    return "\n".join([
        f"Mixed soak: {f.queues:,} queues, {f.consumers:,} waiting consumers, {f.rate:g} "
        f"messages/s for {f.duration_s / 60:g} minutes", "",
        "| | figure | target | |", "|---|---|---|---|",
        row("messages sent a second", f"{f.sent / f.duration_s:.1f}", f">= {f.rate:g}",
            f.verdict["rate"]),
        row("messages lost", f"{f.lost} of {f.sent:,} ({f.duplicates} received twice)", "0",
            f.verdict["lost"]),
        row("answers of 500 or more", f"{f.server_errors} (errors: {errors})", "0",
            f.verdict["5xx"]),
        row("SendMessage p99, first / last fifth", f"{first[SEND]:.1f} / {last[SEND]:.1f} ms",
            f"last <= {P99_RATIO:g}x first", f.verdict["send flat"]),
        row("send-to-receipt p99, first / last fifth",
            f"{first[RECEIPT]:.1f} / {last[RECEIPT]:.1f} ms", f"last <= {P99_RATIO:g}x first",
            f.verdict["receipt flat"]),
        row("DMQ's memory after the warm-up",
            f"{min(dmq, default=0):.0f} to {max(dmq, default=0):.0f} MiB "
            f"({f.rss_growth:+.1%}); DynamoDB Local {min(store, default=0):.0f} to "
            f"{max(store, default=0):.0f} MiB", f"growth < {RSS_GROWTH:.0%}",
            f.verdict["memory flat"]),
        *(["| DMQ's store requests per message sent | " + ", ".join(
            f"{op} {n / max(1, f.sent):.2f}" for op, n in sorted(f.store_calls.items()))
           + " | (no target) | |"] if f.store_calls else []),
    ])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak_mixed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--consumers", type=int, default=500, help="one queue each")
    parser.add_argument("--rate", type=float, default=200.0, help="messages/s (default 200)")
    parser.add_argument("--producers", type=int, default=40,
                        help="threads sending one message at a time (default 40)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--client", choices=("lean", "boto3"), default="lean",
                        help="the load generator's SQS client (default lean)")
    parser.add_argument("--count-store", action="store_true",
                        help="have DMQ count its own store requests, and print them per "
                             "message (it costs the server a little CPU)")
    parser.add_argument("--json", type=Path, default=ROOT / ".dmq" / "soak-mixed.json",
                        help="the figures as JSON (default .dmq/soak-mixed.json)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mixed soak and print its table; 1 when a target failed."""
    args = parse_args(argv)
    if args.consumers > args.queues:
        raise SystemExit("--consumers must not pass --queues (one queue each)")
    print(f"mixed soak: {args.queues:,} queues, {args.consumers:,} waiting consumers, "
          f"{args.rate:g} messages/s for {args.duration:g} s ...", flush=True)
    server = IdleServer()
    try:
        server.start()
        # on the store itself: the proxy would slow it
        dmq = server.start_dmq(counted=False, self_counting=args.count_store)
        figures = _drive(server, args)
        if figures.server_errors:
            print("what the server logged of its refusals (the last 40):\n"
                  + "".join(dmq.refusals), flush=True)
    finally:
        server.stop()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(asdict(figures), indent=2) + "\n", encoding="utf-8")
    print("\n" + markdown(figures) + "\n", flush=True)
    return 0 if all(figures.verdict.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
