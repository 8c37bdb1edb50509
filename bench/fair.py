"""Fair queues: the quiet tenants' dwell time while one tenant floods a standard queue.

Nine quiet tenants send steadily (SendMessage with their MessageGroupId), one tenant
floods (SendMessageBatch) faster than the consumers can process, and consumers drain
the queue. The dwell time of a quiet message is the time from just before its send to
its first receive. Three runs against the real local server on DynamoDB Local:

1. no flood (fair queues on);
2. the flood, fair queues on;
3. the flood, fair queues off (`DMQ_FAIR_QUEUES=off`, a second server).

The consumers model a worker pool, as an SQS consumer library or Lambda's pollers run
one: `--pollers` threads receive (long polling) as many messages as the pool has free
slots for, each message takes `--process-ms` of a slot, and deletes go in batches. The
pool's capacity, slots / process time, is what the flood exceeds.

    python -m bench.fair            # full size, about a minute and a half
    python -m bench.fair --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.servers import Server, start_dmq, wait_idle
from bench.sqs import BATCH, sqs_client

FULL = {"quiet_tenants": 9, "quiet_rate": 1.0, "seconds": 15.0, "flood_rate": 80.0,
        "flood_seconds": 8.0, "slots": 20, "process_ms": 500.0, "pollers": 4,
        "drain_timeout": 60.0}
QUICK = {"quiet_tenants": 3, "quiet_rate": 2.0, "seconds": 2.0, "flood_rate": 100.0,
         "flood_seconds": 1.0, "slots": 10, "process_ms": 200.0, "pollers": 2,
         "drain_timeout": 30.0}
# Traffic before the measured runs, on each server, so that none measures a cold start.
WARMUP = {"quiet_tenants": 9, "quiet_rate": 2.0, "seconds": 4.0, "flood_rate": 0.0,
          "flood_seconds": 0.0}
# After the warm-up, wait at most this long for the server to go quiet (its stream pump
# archiving what the warm-up wrote).
SETTLE_S = 20.0
FLOOD = "tenant-flood"
VISIBILITY_TIMEOUT = 120


@dataclass(frozen=True)
class Config:
    """The sizes of one run."""

    quiet_tenants: int
    quiet_rate: float  # messages per second, each quiet tenant
    seconds: float  # how long the quiet tenants send
    flood_rate: float  # messages per second of the flooding tenant (0: no flood)
    flood_seconds: float
    slots: int
    process_ms: float
    pollers: int
    drain_timeout: float


@dataclass
class PhaseResult:
    """What one run measured."""

    name: str
    fair_queues: bool
    quiet_sent: int
    quiet_received: int
    flood_sent: int
    flood_received: int
    dwell_ms_p50: float
    dwell_ms_p99: float
    dwell_ms_max: float
    seconds: float


@dataclass
class _Tracker:
    sent_at: dict[str, float] = field(default_factory=dict)  # quiet message body -> send time
    first_seen: dict[str, float] = field(default_factory=dict)
    flood_sent: int = 0
    flood_received: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def quiet_left(self) -> int:
        with self.lock:
            return len(self.sent_at) - len(self.first_seen)


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _quiet_sender(endpoint: str, url: str, tenant: str, config: Config, track: _Tracker,
                  start: float) -> None:
    sqs = sqs_client(endpoint)
    count = int(config.seconds * config.quiet_rate)
    # The tenants take turns: tenant k sends k/tenants of an interval after tenant 0.
    offset = int(tenant.rsplit("-", 1)[1]) / (config.quiet_tenants * config.quiet_rate)
    for n in range(count):
        due = start + offset + n / config.quiet_rate
        time.sleep(max(0.0, due - time.monotonic()))
        body = f"{tenant}/{n}"
        with track.lock:
            track.sent_at[body] = time.monotonic()
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=tenant)


def _flood_sender(endpoint: str, url: str, config: Config, track: _Tracker, start: float,
                  share: int, senders: int) -> None:
    sqs = sqs_client(endpoint)
    batches = int(config.flood_rate * config.flood_seconds / BATCH)
    interval = BATCH * senders / config.flood_rate
    for n in range(share, batches, senders):
        due = start + (n // senders) * interval
        time.sleep(max(0.0, due - time.monotonic()))
        entries = [{"Id": str(i), "MessageBody": f"{FLOOD}/{n * BATCH + i}",
                    "MessageGroupId": FLOOD} for i in range(BATCH)]
        result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        with track.lock:
            track.flood_sent += len(result.get("Successful", []))


class _Consumers:
    """Pollers that fill a pool of processing slots; a deleter that batches the deletes."""

    def __init__(self, endpoint: str, url: str, config: Config, track: _Tracker) -> None:
        self._endpoint, self._url, self._config, self._track = endpoint, url, config, track
        # Each poller has its own share of the slots, as independent consumers do.
        share = max(1, config.slots // config.pollers)
        self._free = [threading.Semaphore(share) for _ in range(config.pollers)]
        self._stop = threading.Event()
        self._done: queue.Queue[tuple[float, int, str]] = queue.Queue()
        self._threads = [threading.Thread(target=self._poll, args=(n,),
                                          name=f"bench-fair-poll-{n}")
                         for n in range(config.pollers)]
        self._threads.append(threading.Thread(target=self._delete, name="bench-fair-delete"))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _take_slots(self, free: threading.Semaphore) -> int:
        """Wait for one free slot, then take as many more as are free (up to a batch)."""
        while not free.acquire(timeout=0.2):
            if self._stop.is_set():
                return 0
        taken = 1
        while taken < BATCH and free.acquire(blocking=False):
            taken += 1
        return taken

    def _poll(self, poller: int) -> None:
        sqs = sqs_client(self._endpoint, read_timeout=30)
        free = self._free[poller]
        while not self._stop.is_set():
            slots = self._take_slots(free)
            if not slots:
                return
            got = sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=slots,
                                      WaitTimeSeconds=1,
                                      VisibilityTimeout=VISIBILITY_TIMEOUT).get("Messages", [])
            now = time.monotonic()
            with self._track.lock:
                for message in got:
                    body = message["Body"]
                    if body.startswith(FLOOD):
                        self._track.flood_received += 1
                    else:
                        self._track.first_seen.setdefault(body, now)
            for _ in range(slots - len(got)):
                free.release()
            for message in got:
                self._done.put((now + self._config.process_ms / 1000, poller,
                                message["ReceiptHandle"]))

    def _delete(self) -> None:
        sqs = sqs_client(self._endpoint)
        pending: list[tuple[float, int, str]] = []
        while not (self._stop.is_set() and not pending and self._done.empty()):
            with contextlib.suppress(queue.Empty):
                pending.append(self._done.get(timeout=0.01))
            now = time.monotonic()
            ready = sorted(p for p in pending if p[0] <= now)
            pending = [p for p in pending if p[0] > now]
            for _, poller, _ in ready:
                self._free[poller].release()  # processed: the slot takes the next message
            for start in range(0, len(ready), BATCH):
                chunk = ready[start:start + BATCH]
                sqs.delete_message_batch(QueueUrl=self._url, Entries=[
                    {"Id": str(i), "ReceiptHandle": handle} for i, (_, _, handle) in
                    enumerate(chunk)])


def run_phase(endpoint: str, name: str, config: Config, fair: bool) -> PhaseResult:
    """One run on a queue of its own; returns the quiet tenants' dwell figures."""
    sqs = sqs_client(endpoint)
    url = sqs.create_queue(QueueName=f"dmq-bench-fair-{name}-{int(time.time() * 1000)}",
                           Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT)})["QueueUrl"]
    track = _Tracker()
    consumers = _Consumers(endpoint, url, config, track)
    consumers.start()
    started = time.monotonic()
    start = started + 0.2
    senders = [threading.Thread(target=_quiet_sender, name=f"bench-fair-quiet-{t}",
                                args=(endpoint, url, f"tenant-{t}", config, track, start))
               for t in range(config.quiet_tenants)]
    flooders = 2
    if config.flood_rate > 0:
        senders += [threading.Thread(target=_flood_sender, name=f"bench-fair-flood-{n}",
                                     args=(endpoint, url, config, track, start, n, flooders))
                    for n in range(flooders)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    deadline = time.monotonic() + config.drain_timeout
    while track.quiet_left() and time.monotonic() < deadline:
        time.sleep(0.05)
    consumers.stop()
    elapsed = time.monotonic() - started
    with track.lock:
        dwell = [(track.first_seen[b] - sent) * 1000 for b, sent in track.sent_at.items()
                 if b in track.first_seen]
        result = PhaseResult(
            name=name, fair_queues=fair, quiet_sent=len(track.sent_at),
            quiet_received=len(track.first_seen), flood_sent=track.flood_sent,
            flood_received=track.flood_received,
            dwell_ms_p50=round(_percentile(dwell, 0.50), 1),
            dwell_ms_p99=round(_percentile(dwell, 0.99), 1),
            dwell_ms_max=round(max(dwell, default=0.0), 1), seconds=round(elapsed, 1))
    sqs.delete_queue(QueueUrl=url)
    return result


def _with_server(data_dir: Path, fair: bool, phases: list[tuple[str, Config]]
                 ) -> list[PhaseResult]:
    server: Server = start_dmq(data_dir, extra_env={"DMQ_FAIR_QUEUES": "on" if fair else "off"})
    try:
        server.wait_answering()
        run_phase(server.url, "warmup", Config(**{**asdict(phases[0][1]), **WARMUP}), fair)
        results = []
        for name, config in phases:
            wait_idle(server.process.pid, timeout_s=SETTLE_S)
            results.append(run_phase(server.url, name, config, fair))
        return results
    finally:
        server.stop()


def measure(config: Config) -> list[PhaseResult]:
    """The three runs: two on a server with fair queues on, one with them off."""
    calm = Config(**{**asdict(config), "flood_rate": 0.0})
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-fair-"))
    try:
        results = _with_server(data_dir / "on", True, [("no-flood", calm), ("flood-fair", config)])
        results += _with_server(data_dir / "off", False, [("flood-unfair", config)])
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return results


def summary(results: Sequence[PhaseResult]) -> dict[str, Any]:
    """The ratios the issue sets targets for."""
    by_name = {r.name: r for r in results}
    base = max(by_name["no-flood"].dwell_ms_p99, 0.1)
    fair = by_name["flood-fair"].dwell_ms_p99 / base
    unfair = by_name["flood-unfair"].dwell_ms_p99 / base
    return {"fair_over_no_flood": round(fair, 2), "unfair_over_no_flood": round(unfair, 2),
            "fair_within_2x": fair <= 2.0, "unfair_over_10x": unfair > 10.0}


def report(config: Config, results: Sequence[PhaseResult]) -> str:
    """The Markdown block the benchmark prints."""
    lines = [
        "### Fair queues: quiet tenants' dwell time (send to first receive)",
        "",
        f"{config.quiet_tenants} quiet tenants at {config.quiet_rate:g} msg/s each for "
        f"{config.seconds:g} s; one tenant floods at {config.flood_rate:g} msg/s for "
        f"{config.flood_seconds:g} s; consumers: {config.slots} slots x {config.process_ms:g} ms "
        f"(capacity {config.slots * 1000 / config.process_ms:g} msg/s), {config.pollers} "
        "pollers.",
        "",
        "| run | fair queues | quiet sent | quiet received | flood sent | p50 ms | p99 ms "
        "| max ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r.name} | {'on' if r.fair_queues else 'off'} | {r.quiet_sent} | "
                     f"{r.quiet_received} | {r.flood_sent} | {r.dwell_ms_p50:g} | "
                     f"{r.dwell_ms_p99:g} | {r.dwell_ms_max:g} |")
    ratios = summary(results)
    lines += [
        "",
        f"quiet p99 with the flood, fair queues on: {ratios['fair_over_no_flood']:g}x the "
        f"no-flood p99 (target at most 2x: {'met' if ratios['fair_within_2x'] else 'missed'})",
        f"quiet p99 with the flood, fair queues off: {ratios['unfair_over_no_flood']:g}x "
        f"(expected over 10x: {'yes' if ratios['unfair_over_10x'] else 'no'})",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[Config, Path | None]:
    """The command line; --quick shrinks every size for a smoke run."""
    parser = argparse.ArgumentParser(prog="python -m bench.fair", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, value in FULL.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=None,
                            help=f"default {value!r}; quick {QUICK[name]!r}")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    values: dict[str, Any] = {n: getattr(args, n) if getattr(args, n) is not None else v
                              for n, v in sizes.items()}
    return Config(**values), args.json


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three phases and print the figures."""
    config, json_path = parse_args(argv)
    results = measure(config)
    print("\n" + report(config, results) + "\n", flush=True)
    if json_path is not None:
        json_path.write_text(json.dumps({"config": asdict(config),
                                         "runs": [asdict(r) for r in results],
                                         "summary": summary(results)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
