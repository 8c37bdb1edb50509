"""Shard autoscaling under a ramp: a standard queue and a FIFO queue (20 message groups)
each go from idle to five times the per-shard target, hold, wobble by +-20%, and stop,
side by side on a local server whose autoscaler checks every few seconds. Printed, for
each: the shard count over time, how many checks after the plateau began the queue had
its shards, the splits and merges while the load held steady, how long after the load
stopped it was back to one shard, the messages lost, and (FIFO) the messages that came
out of their group's order.

The right count at the plateau is the shards that carry 5x the target at the target
each, 5; the autoscaler aims at 80% of it (up to `ceil(5 / 0.8) = 7`), so a count from 5
to 7 is right, and more is an overshoot. The bench checks every 10 s and splits after two
checks in a row over the target (the default is three, at a one-minute interval): the
rates of a short interval are two five-second slots, which lag the load by up to a slot
and the handler's settling time.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from bench.servers import start_dmq
from bench.sqs import sqs_client

QUEUE = "dmq-bench-autoscale"
FIFO_QUEUE = "dmq-bench-autoscale.fifo"
FIFO_GROUPS = 20
HEADROOM = 0.8


@dataclass(frozen=True)
class Phase:
    """A stretch of the load: `factor` times the target for `intervals` checks."""

    name: str
    factor: float
    intervals: int
    wobble: bool = False  # +-20% around the factor, alternating each interval


def phases(quick: bool) -> list[Phase]:
    """Idle to 1.5x, 3x, then the 5x plateau; the steady wobble; then no load at all."""
    step = 3 if quick else 4
    return [Phase("1.5x", 1.5, step), Phase("3x", 3.0, step), Phase("plateau 5x", 5.0, step),
            Phase("steady 5x +-20%", 5.0, 2 * step, wobble=True)]


@dataclass
class Timeline:
    """Shard counts seen, and when each phase began (seconds from the start)."""

    seen: list[tuple[float, int]]
    began: dict[str, float]

    def first_at(self, shards: int, after: float, at_least: bool = False) -> float | None:
        return next((t for t, n in self.seen
                     if t >= after and (n >= shards if at_least else n == shards)), None)

    def changes(self, start: float, end: float) -> int:
        inside = [n for t, n in self.seen if start <= t < end]
        return sum(1 for a, b in pairwise(inside) if a != b)


class Load:
    """Producers at a set rate (batches of ten) and consumers that receive and delete.

    With `groups`, the queue is FIFO: each producer sends to its own share of the groups,
    numbering each group's messages, and the consumers note each message before they
    delete it, so that a group's next message (which FIFO holds back until then) is
    always noted after it: a number below its group's last is out of order.
    """

    def __init__(self, url: str, endpoint: str, producers: int = 2, consumers: int = 4,
                 groups: int = 0) -> None:
        self._url = url
        self._endpoint = endpoint
        self._groups = groups
        self.rate = 0.0  # messages per second, read by the producers
        self.sent: set[str] = set()
        self.received: set[str] = set()
        self.out_of_order = 0
        self._last_of_group: dict[str, int] = {}
        self.last_delete = 0.0  # time.monotonic() of the last delete of a message
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_consumers = threading.Event()
        self._threads = [threading.Thread(target=self._produce, args=(i, producers),
                                          daemon=True) for i in range(producers)]
        self._threads += [threading.Thread(target=self._consume, daemon=True)
                          for _ in range(consumers)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _produce(self, index: int, producers: int) -> None:
        sqs = sqs_client(self._endpoint)
        number = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            rate = self.rate / producers
            if rate <= 0:
                next_at = time.monotonic()
                self._stop.wait(0.1)
                continue
            next_at += 10 / rate
            self._stop.wait(max(0.0, next_at - time.monotonic()))
            bodies = [self._body(index, producers, number + i) for i in range(10)]
            number += 10
            failed = sqs.send_message_batch(QueueUrl=self._url, Entries=[
                {"Id": str(i), "MessageBody": b, **self._group_of(b)}
                for i, b in enumerate(bodies)]).get("Failed")
            sent = set(bodies) - {bodies[int(f["Id"])] for f in failed or []}
            with self._lock:
                self.sent |= sent

    def _consume(self) -> None:
        sqs = sqs_client(self._endpoint)
        while not self._stop_consumers.is_set():
            got = sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10,
                                      WaitTimeSeconds=1).get("Messages", [])
            if not got:
                continue
            with self._lock:
                self.received |= {m["Body"] for m in got}
                for message in got:
                    self._note_order(message["Body"])
            sqs.delete_message_batch(QueueUrl=self._url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
            with self._lock:
                self.last_delete = time.monotonic()

    def _body(self, producer: int, producers: int, number: int) -> str:
        """A message body: `p<producer>-<n>`; FIFO: `g<group>-<n>`, n counting within
        the group (the producer owns the groups g with g % producers == producer)."""
        if not self._groups:
            return f"p{producer}-{number}"
        mine = [g for g in range(self._groups) if g % producers == producer]
        return f"g{mine[number % len(mine)]}-{number // len(mine)}"

    def _group_of(self, body: str) -> dict[str, str]:
        return {"MessageGroupId": body.split("-")[0]} if self._groups else {}

    def _note_order(self, body: str) -> None:
        if not self._groups:
            return
        group, number = body.split("-")
        if int(number) < self._last_of_group.get(group, -1):
            self.out_of_order += 1
        self._last_of_group[group] = max(int(number), self._last_of_group.get(group, -1))

    def stop_producing(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._stop_consumers.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def lost(self) -> int:
        with self._lock:
            return len(self.sent - self.received)


def _watch(read: Callable[[], int], started: float, seen: list[tuple[float, int]],
           stop: threading.Event) -> None:
    while not stop.is_set():
        seen.append((time.monotonic() - started, read()))
        stop.wait(0.5)


def run(target: float, interval_s: float, cooldown_s: float, checks: int,
        quick: bool) -> list[Figures]:
    """Drive the ramp on a fresh local server; the figures."""
    env = {"DMQ_AUTOSCALE": "on", "DMQ_SHARD_TARGET_RATE": str(target),
           "DMQ_AUTOSCALE_INTERVAL_S": str(interval_s),
           "DMQ_AUTOSCALE_COOLDOWN_S": str(cooldown_s), "DMQ_AUTOSCALE_CHECKS": str(checks),
           "DMQ_COUNT_DYNAMODB": "0"}
    with tempfile.TemporaryDirectory(prefix="dmq-bench-autoscale-") as data:
        server = start_dmq(Path(data), extra_env=env)
        try:
            server.wait_answering()
            return _drive(server.url, target, interval_s, cooldown_s, quick)
        finally:
            server.stop()


@dataclass
class Subject:
    """One queue under the ramp: its load and the shard counts seen."""

    kind: str  # "standard" or "FIFO"
    url: str
    load: Load
    timeline: Timeline


def _drive(endpoint: str, target: float, interval_s: float, cooldown_s: float,
           quick: bool) -> list[Figures]:
    sqs = sqs_client(endpoint)
    standard = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    fifo = sqs.create_queue(QueueName=FIFO_QUEUE, Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    subjects = [Subject("standard", standard, Load(standard, endpoint), Timeline([], {})),
                Subject("FIFO", fifo, Load(fifo, endpoint, groups=FIFO_GROUPS),
                        Timeline([], {}))]

    def shards_of(url: str) -> Callable[[], int]:
        def read() -> int:
            found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DmqShardCount"])
            return int(found["Attributes"]["DmqShardCount"])
        return read

    started = time.monotonic()
    stop_watch = threading.Event()
    watchers = [threading.Thread(target=_watch, args=(shards_of(s.url), started,
                                                      s.timeline.seen, stop_watch),
                                 daemon=True) for s in subjects]
    for thread in watchers:
        thread.start()
    for subject in subjects:
        subject.load.start()
    try:
        _ramp(subjects, target, interval_s, started, quick)
        stopped = time.monotonic() - started
        deadline = time.monotonic() + cooldown_s + 6 * interval_s
        while time.monotonic() < deadline and any(shards_of(s.url)() > 1 for s in subjects):
            time.sleep(0.5)
        time.sleep(2 * interval_s)  # the consumers empty the queues
        # The load stopped when its last message was deleted: the consumers drain what
        # the producers left, and their deletes are the queue's load as much as sends.
        for subject in subjects:
            subject.timeline.began["stopped"] = stopped
            subject.timeline.began["quiet"] = max(stopped, subject.load.last_delete - started)
    finally:
        stop_watch.set()
        for thread in watchers:
            thread.join(timeout=5)
        for subject in subjects:
            subject.load.stop()
    return [_figures(s, target, interval_s, cooldown_s) for s in subjects]


def _ramp(subjects: list[Subject], target: float, interval_s: float, started: float,
          quick: bool) -> None:
    """The phases, the same load on every queue at once; then no load."""
    for phase in phases(quick):
        for subject in subjects:
            subject.timeline.began[phase.name] = time.monotonic() - started
        for i in range(phase.intervals):
            wobble = (1.2 if i % 2 == 0 else 0.8) if phase.wobble else 1.0
            for subject in subjects:
                subject.load.rate = target * phase.factor * wobble
            time.sleep(interval_s)
    for subject in subjects:
        subject.load.rate = 0


@dataclass(frozen=True)
class Figures:
    """What one run measured, for one queue."""

    kind: str
    target: float
    interval_s: float
    cooldown_s: float
    right_shards: int
    most_shards: int
    max_shards: int
    plateau_to_right_intervals: float | None
    changes_while_steady: int
    stop_to_one_shard_s: float | None
    drain_s: float  # from the producers' stop to the last delete
    sent: int
    lost: int
    out_of_order: int
    timeline: list[tuple[float, int]]


def _figures(subject: Subject, target: float, interval_s: float,
             cooldown_s: float) -> Figures:
    timeline, load = subject.timeline, subject.load
    right = 5
    plateau = timeline.began["plateau 5x"]
    stopped, quiet = timeline.began["stopped"], timeline.began["quiet"]
    reached = timeline.first_at(right, plateau, at_least=True)
    back = timeline.first_at(1, quiet)
    return Figures(subject.kind, target, interval_s, cooldown_s, right,
                   math.ceil(5.0 / HEADROOM), max((n for _, n in timeline.seen), default=0),
                   None if reached is None else (reached - plateau) / interval_s,
                   timeline.changes(timeline.began["steady 5x +-20%"], stopped),
                   None if back is None else back - quiet, quiet - stopped,
                   len(load.sent), load.lost(), load.out_of_order, _compress(timeline.seen))


def _compress(seen: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The moments the shard count changed."""
    kept: list[tuple[float, int]] = []
    for t, n in seen:
        if not kept or kept[-1][1] != n:
            kept.append((round(t, 1), n))
    return kept


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(f: Figures) -> str:
    """The figures as docs/benchmarks.md records them."""
    limit_back = f.cooldown_s + 3 * f.interval_s
    reached = f.plateau_to_right_intervals
    back = f.stop_to_one_shard_s
    lines = [
        f"Autoscaling, {f.kind} queue: target {f.target:g} msg/s per shard, check every "
        f"{f.interval_s:g} s, cool-down {f.cooldown_s:g} s",
        f"  shard count over time (s, shards): {f.timeline}",
        f"  right count at 5x: {f.right_shards} to {f.most_shards}; {f.right_shards} reached "
        + ("never" if reached is None else f"{reached:.1f} intervals after the plateau began "
           f"({_verdict(reached <= 3)}: within 3)"),
        f"  most shards: {f.max_shards} ({_verdict(f.max_shards <= f.most_shards)}: "
        f"no overshoot past {f.most_shards})",
        f"  splits or merges while steady within +-20%: {f.changes_while_steady} "
        f"({_verdict(f.changes_while_steady == 0)})",
        f"  back to 1 shard after the load stopped (the last delete, {f.drain_s:.1f} s after "
        "the last send): "
        + ("never" if back is None else f"{back:.1f} s ({_verdict(back <= limit_back)}: "
           f"within the cool-down plus 3 intervals, {limit_back:.0f} s)"),
        f"  messages sent {f.sent}, lost {f.lost} ({_verdict(f.lost == 0)})",
    ]
    if f.kind == "FIFO":
        lines.append(f"  out of their group's order: {f.out_of_order} "
                     f"({_verdict(f.out_of_order == 0)})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the autoscaling benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.autoscale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=float, default=10.0,
                        help="DMQ_SHARD_TARGET_RATE for the run (default 10 msg/s)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between checks")
    parser.add_argument("--cooldown", type=float, default=30.0, help="scale-in cool-down (s)")
    parser.add_argument("--checks", type=int, default=2, help="checks in a row to split")
    parser.add_argument("--quick", action="store_true", help="shorter phases")
    args = parser.parse_args(argv)
    for figures in run(args.target, args.interval, args.cooldown, args.checks, args.quick):
        print(report(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
