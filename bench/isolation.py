"""Isolation: one cluster's store freezes; the other clusters' queues go on as before.

Clusters `default` (the server's own store), `c2` and `c3` (a DynamoDB Local each,
DMQ_CLUSTER_ENDPOINTS), one queue on each (`DmqCluster`), under a steady load: producers
send 20 messages/s per queue, consumers receive (up to ten) and delete a few times a
second, and a probe calls ListQueues (metadata, on the main store) every 200 ms. Each SDK
call (standard retries, two attempts at most) and each of its HTTP attempts is timed.
After a warm-up and a baseline, c3's DynamoDB Local (its java process) gets SIGSTOP, then
SIGCONT and a recovery phase; then the queues are drained (docs/isolation.md, "Measured").

    python -m bench.isolation            # warm-up 25 s, baseline 20, freeze 30, recovery 20
    python -m bench.isolation --quick    # warm-up 20 s, baseline 10, freeze 15, recovery 10
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import start_dmq, stop_like_ctrl_c, wait_idle
from bench.timing import Latency
from dmqlocal.dynamodb_local import DynamoDBLocal

CLUSTERS = ("default", "c2", "c3")
FROZEN, PROBE = "c3", "probe"  # the cluster whose store freezes; the ListQueues probe
SEND_RATE, PRODUCERS, CONSUMERS = 20.0, 2, 2  # messages/s per queue; its threads
RECEIVE_EVERY_S, PROBE_EVERY_S = 0.4, 0.2  # each consumer thread's pace; the probe's
VISIBILITY_S, DRAIN_MAX_S = 5, 90.0  # what the load could not delete is back soon
CLIENT_READ_TIMEOUT_S = 5.0  # over the server's store budget: its own answer comes first
FAST_MS, FREEZE_TO_FAST_S, P99_RATIO, PROBE_MAX_MS = 100.0, 5.0, 1.2, 1000.0  # targets
# A receive answered with no message and no store call: the process knew the shard held
# nothing visible (a receive of its had just taken the shard's last message, and every
# write since would have voided that). It needs nothing of the frozen cluster.
EMPTY_RECEIVE = "empty receive"
# A frozen store call fails after 1 s (one try); five failures in the last ten calls open
# the breaker, which probes with one call after 5 s (a probe waits out the frozen second).
SERVER_ENV = {"DMQ_STORE_READ_TIMEOUT_S": "1", "DMQ_STORE_ATTEMPTS": "1",
              "DMQ_BREAKER_WINDOW_CALLS": "10", "DMQ_BREAKER_MINIMUM_CALLS": "5",
              "DMQ_BREAKER_FAILURE_RATE_PCT": "50", "DMQ_BREAKER_SLOW_CALL_MS": "1000",
              "DMQ_BREAKER_OPEN_WAIT_MS": "5000", "DMQ_BREAKER_HALF_OPEN_CALLS": "1"}
OPEN_WAIT_S = int(SERVER_ENV["DMQ_BREAKER_OPEN_WAIT_MS"]) / 1000
PROBE_CALL_S = 0.5  # one probe interval: the open wait, then the probe call itself


@dataclass(frozen=True)
class Phases:
    """How long each phase lasts, in seconds."""

    warmup: float
    baseline: float
    freeze: float
    recovery: float


# Three fresh JVMs and the server take about 20 s to reach their steady latency.
FULL = Phases(warmup=25.0, baseline=20.0, freeze=30.0, recovery=20.0)
QUICK = Phases(warmup=20.0, baseline=10.0, freeze=15.0, recovery=10.0)


@dataclass(frozen=True)
class Timed:
    """An SDK call or one HTTP attempt of it: when it began and ended (monotonic s), its
    HTTP status (0: none, or not kept) and error code (empty when it succeeded; an
    attempt's refusal by a cluster's guard is "ServiceUnavailable (breaker)")."""

    cluster: str
    start: float
    end: float
    status: int
    code: str

    @property
    def refused(self) -> bool:
        """Answered with SQS's retryable ServiceUnavailable (503)."""
        return self.status == 503 and self.code.startswith("ServiceUnavailable")


@dataclass
class Journal:
    """Everything the clients saw."""

    attempts: list[Timed] = field(default_factory=list)
    calls: list[Timed] = field(default_factory=list)
    acked: dict[str, float] = field(default_factory=dict)  # body -> acknowledged at
    received: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, cluster: str, call: Callable[..., Any], **kwargs: Any) -> Any | None:
        """`call(**kwargs)`, recorded; None when it failed."""
        start, answer, code = time.monotonic(), None, ""
        try:
            answer = call(**kwargs)
        except (BotoCoreError, ClientError) as exc:
            code = (exc.response.get("Error", {}).get("Code", "")
                    if isinstance(exc, ClientError) else "") or type(exc).__name__
        self.calls.append(Timed(cluster, start, time.monotonic(), 0, code))
        return answer


def client(endpoint: str, journal: Journal, cluster: str) -> Any:
    """An SQS client for one thread; each of its HTTP attempts goes into the journal."""
    sqs = boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="dmq-bench", aws_secret_access_key="dmq-bench",
        config=Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=2,
                      read_timeout=CLIENT_READ_TIMEOUT_S))
    began = [0.0]

    def before_send(**_: Any) -> None:
        began[0] = time.monotonic()

    def received(response_dict: dict[str, Any] | None, parsed_response: dict[str, Any] | None,
                 exception: BaseException | None, event_name: str = "", **_: Any) -> None:
        status = int(response_dict["status_code"]) if response_dict else 0
        error = (parsed_response or {}).get("Error", {}) if status >= 300 else {}
        code = error.get("Code", "") + (  # the guard's message names the cluster
            " (breaker)" if str(error.get("Message", "")).startswith("Cluster ") else "")
        if (status == 200 and event_name.endswith(".ReceiveMessage")
                and not (parsed_response or {}).get("Messages")):
            code = EMPTY_RECEIVE
        if exception is not None:
            code = type(exception).__name__
        journal.attempts.append(Timed(cluster, began[0], time.monotonic(), status, code))

    sqs.meta.events.register("before-send.sqs", before_send)
    sqs.meta.events.register("response-received.sqs", received)
    return sqs


def paced(stop: threading.Event, period: float, offset: float, step: Callable[[], object]) -> None:
    """Run `step` every `period` seconds until `stop`; slots a slow step missed are skipped."""
    next_at = time.monotonic() + offset
    while not stop.is_set():
        if stop.wait(max(0.0, next_at - time.monotonic())):
            return
        step()
        next_at = max(next_at + period, time.monotonic())


def _send(journal: Journal, cluster: str, url: str, numbers: Iterator[int], sqs: Any) -> None:
    body = f"{cluster}-{next(numbers):07d}"
    if journal.timed(cluster, sqs.send_message, QueueUrl=url, MessageBody=body) is not None:
        with journal.lock:
            journal.acked[body] = time.monotonic()


def _consume(journal: Journal, cluster: str, url: str, sqs: Any, wait: int = 0) -> int:
    got = journal.timed(cluster, sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10,
                        WaitTimeSeconds=wait)
    messages = (got or {}).get("Messages", [])
    with journal.lock:
        journal.received.update(m["Body"] for m in messages)
    if messages:
        journal.timed(cluster, sqs.delete_message_batch, QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    return len(messages)


def load_threads(endpoint: str, urls: dict[str, str], journal: Journal,
                 stop: threading.Event) -> list[threading.Thread]:
    """Every queue's producers and consumers and the ListQueues probe, a client each."""
    jobs: list[tuple[float, float, Callable[[], object]]] = []
    for cluster, url in urls.items():
        numbers = itertools.count()
        jobs += [(PRODUCERS / SEND_RATE, n / SEND_RATE, partial(
            _send, journal, cluster, url, numbers, client(endpoint, journal, cluster)))
            for n in range(PRODUCERS)]
        jobs += [(RECEIVE_EVERY_S, n * RECEIVE_EVERY_S / CONSUMERS, partial(
            _consume, journal, cluster, url, client(endpoint, journal, cluster)))
            for n in range(CONSUMERS)]
    jobs.append((PROBE_EVERY_S, 0.0, partial(journal.timed, PROBE,
                                             client(endpoint, journal, PROBE).list_queues)))
    return [threading.Thread(target=paced, args=(stop, *job), daemon=True,
                             name=f"bench-isolation-{n}") for n, job in enumerate(jobs)]


def drain(endpoint: str, url: str, journal: Journal) -> None:
    """Receive and delete until nothing came for longer than the visibility timeout."""
    sqs = client(endpoint, journal, "drain")
    began = last = time.monotonic()
    while time.monotonic() - last < VISIBILITY_S + 2 and time.monotonic() < began + DRAIN_MAX_S:
        if _consume(journal, "drain", url, sqs, wait=1):
            last = time.monotonic()


def drive(endpoint: str, urls: dict[str, str], frozen_pid: int,
          phases: Phases) -> tuple[Journal, dict[str, float]]:
    """The load through every phase, SIGSTOP and SIGCONT of `frozen_pid`, then the drain."""
    journal, stop = Journal(), threading.Event()
    threads = load_threads(endpoint, urls, journal, stop)
    try:
        for thread in threads:
            thread.start()
        time.sleep(phases.warmup)
        marks = {"baseline": time.monotonic()}
        time.sleep(phases.baseline)
        os.kill(frozen_pid, signal.SIGSTOP)
        marks["freeze"] = time.monotonic()
        try:
            time.sleep(phases.freeze)
        finally:
            os.kill(frozen_pid, signal.SIGCONT)
        marks["thaw"] = time.monotonic()
        time.sleep(phases.recovery)
        marks["end"] = time.monotonic()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=CLIENT_READ_TIMEOUT_S * 3)
    with ThreadPoolExecutor(len(urls)) as pool:
        list(pool.map(lambda url: drain(endpoint, url, journal), urls.values()))
    return journal, marks


def _stop_store(store: DynamoDBLocal) -> None:
    """SIGCONT first (a stopped process would not act on SIGTERM), then stop it."""
    if (pid := store.pid) is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    store.stop()


@contextlib.contextmanager
def fleet() -> Iterator[tuple[str, dict[str, str], int]]:
    """Two DynamoDB Locals, a server and a queue per cluster: (endpoint, queue URLs, pid of
    the store to freeze). Each process started here is stopped, after an error or Ctrl-C too."""
    with contextlib.ExitStack() as stack:
        data = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="dmq-bench-isolation-")))
        stores = {}
        for cluster in CLUSTERS[1:]:
            stores[cluster] = DynamoDBLocal(data / cluster)
            stack.callback(_stop_store, stores[cluster])
            stop_like_ctrl_c()
            stores[cluster].start()
        server = start_dmq(data / "server", extra_env={
            **SERVER_ENV, "DMQ_COUNT_DYNAMODB": "0", "DMQ_CLUSTERS": ",".join(CLUSTERS[1:]),
            "DMQ_CLUSTER_ENDPOINTS": ",".join(f"{c}={s.endpoint}" for c, s in stores.items())})
        stack.callback(server.stop)
        server.wait_answering()
        sqs = client(server.url, Journal(), "setup")
        urls = {}
        for cluster in CLUSTERS:
            urls[cluster] = sqs.create_queue(QueueName=f"isolation-{cluster}", Attributes={
                "DmqCluster": cluster, "VisibilityTimeout": str(VISIBILITY_S)})["QueueUrl"]
            placed = sqs.get_queue_attributes(QueueUrl=urls[cluster], AttributeNames=[
                "DmqCluster"])["Attributes"].get("DmqCluster")
            assert placed == cluster, f"the queue meant for {cluster} was placed on {placed}"
        wait_idle(server.process.pid, timeout_s=60)
        pid = stores[FROZEN].pid
        assert pid is not None
        yield server.url, urls, pid


@dataclass(frozen=True)
class Figures:
    """What a run measured (times in seconds, latencies in milliseconds)."""

    phases: Phases
    baseline: dict[str, Latency]  # the other clusters' calls before the freeze
    frozen: dict[str, Latency]  # ... and during it
    errors: dict[str, int]  # ... their failed calls during it
    fast_after_s: float | None  # SIGSTOP to c3's first fast ServiceUnavailable
    fast: Latency  # c3's attempts from then on, answered before SIGCONT
    breaker: Latency  # ... those a guard refused (the rest waited on the store)
    fast_codes: Counter[str]  # ... by status and code
    recovered_s: float | None  # SIGCONT to c3's first success
    acked_before: int
    lost_before: int  # acknowledged before the freeze, never received
    acked: int
    lost: int
    probe: Latency  # ListQueues from SIGSTOP to the end
    probe_errors: int
    other_5xx: int  # answers 5xx other than ServiceUnavailable, whole run
    no_answer: int  # attempts that got no answer at all (client timeouts, resets)


def _latency(timed: Sequence[Timed]) -> Latency:
    return Latency.of([t.end - t.start for t in timed])


def figures(journal: Journal, marks: dict[str, float], phases: Phases) -> Figures:
    """The figures of one run's journal."""
    def window(cluster: str, start: float, end: float) -> list[Timed]:
        return [c for c in journal.calls if c.cluster == cluster and start <= c.start < end]

    others = [c for c in CLUSTERS if c != FROZEN]
    held = {c: window(c, marks["freeze"], marks["thaw"]) for c in others}
    frozen = sorted((a for a in journal.attempts if a.cluster == FROZEN), key=lambda a: a.start)
    first = next((a for a in frozen if a.start >= marks["freeze"] and a.refused
                  and a.end - a.start < FAST_MS / 1000), None)
    after = [a for a in frozen  # answered while frozen, from the first fast refusal on
             if first is not None and first.start <= a.start and a.end < marks["thaw"]]
    back = [a.end for a in frozen if a.status == 200 and a.code != EMPTY_RECEIVE
            and a.end >= marks["thaw"]]
    before = [body for body, at in journal.acked.items() if at < marks["freeze"]]
    probes = window(PROBE, marks["freeze"], marks["end"])
    return Figures(
        phases, {c: _latency(window(c, marks["baseline"], marks["freeze"])) for c in others},
        {c: _latency(v) for c, v in held.items()},
        {c: sum(1 for call in v if call.code) for c, v in held.items()},
        None if first is None else first.end - marks["freeze"], _latency(after),
        _latency([a for a in after if a.code.endswith("(breaker)")]),
        Counter(f"{a.status} {a.code or 'OK'}" for a in after),
        None if not back else min(back) - marks["thaw"],
        len(before), sum(1 for b in before if b not in journal.received),
        len(journal.acked), sum(1 for b in journal.acked if b not in journal.received),
        _latency(probes), sum(1 for c in probes if c.code),
        sum(1 for a in journal.attempts if a.status >= 500 and not a.refused),
        sum(1 for a in journal.attempts if a.status == 0))


def verdicts(f: Figures) -> dict[str, bool]:
    """Each target: met or not."""
    refused = sum(n for code, n in f.fast_codes.items()
                  if code.startswith("503 ") or code == f"200 {EMPTY_RECEIVE}")
    return {
        **{f"p99 {c}": f.frozen[c].p99_ms <= P99_RATIO * f.baseline[c].p99_ms
           for c in f.frozen},
        **{f"errors {c}": n == 0 for c, n in f.errors.items()},
        "fast after": f.fast_after_s is not None and f.fast_after_s <= FREEZE_TO_FAST_S,
        "fast p99": f.fast.count > 0 and f.fast.p99_ms < FAST_MS,
        "fast refused": f.fast.count > 0 and refused == f.fast.count,
        "recovered": f.recovered_s is not None and f.recovered_s <= OPEN_WAIT_S + PROBE_CALL_S,
        "lost": f.lost_before == 0,
        "probe": f.probe.count > 0 and f.probe.max_ms < PROBE_MAX_MS and not f.probe_errors,
        "5xx": f.other_5xx == 0 and f.no_answer == 0,
    }


def report(f: Figures) -> str:
    """The figures, with PASS or FAIL against each target."""
    ok = {k: "PASS" if v else "FAIL" for k, v in verdicts(f).items()}
    lines = [
        f"Isolation: clusters {', '.join(CLUSTERS)}; {FROZEN}'s DynamoDB Local stopped "
        f"(SIGSTOP) for {f.phases.freeze:g} s after a {f.phases.baseline:g} s baseline, then "
        f"{f.phases.recovery:g} s of recovery; {SEND_RATE:g} msg/s per queue, {PRODUCERS} "
        f"producers and {CONSUMERS} consumers each; load average at the end "
        + " / ".join(f"{n:.1f}" for n in os.getloadavg()),
        "  server: " + " ".join(f"{k}={v}" for k, v in SERVER_ENV.items()),
    ]
    for c, held in f.frozen.items():
        base = f.baseline[c]
        ratio = held.p99_ms / base.p99_ms if base.p99_ms else float("inf")
        lines.append(
            f"  {c}: p50 / p99 {base.p50_ms:.1f} / {base.p99_ms:.1f} ms before the freeze "
            f"({base.count} calls), {held.p50_ms:.1f} / {held.p99_ms:.1f} ms during it "
            f"({held.count} calls, p99 {ratio:.2f}x; "
            f"{ok['p99 ' + c]}: within {P99_RATIO}x); {f.errors[c]} failed calls during it "
            f"({ok['errors ' + c]}: 0)")
    fast, back = ("never" if v is None else f"{v:.2f} s" for v in (f.fast_after_s, f.recovered_s))
    codes = ", ".join(f"{n} {code}" for code, n in f.fast_codes.most_common())
    lines += [
        f"  {FROZEN}: failing fast {fast} after SIGSTOP ({ok['fast after']}: within "
        f"{FREEZE_TO_FAST_S:g} s); then {f.fast.count} attempts answered before SIGCONT, p50 "
        f"{f.fast.p50_ms:.1f} ms, p99 {f.fast.p99_ms:.1f} ms ({ok['fast p99']}: under "
        f"{FAST_MS:g} ms), max {f.fast.max_ms:.0f} ms; those refused by the breaker: p99 "
        f"{f.breaker.p99_ms:.1f} ms, max {f.breaker.max_ms:.0f} ms",
        f"  {FROZEN}: answers then: {codes or 'none'} ({ok['fast refused']}: every one a "
        "retryable ServiceUnavailable, or a receive that needed no store call)",
        f"  {FROZEN}: first success {back} after SIGCONT ({ok['recovered']}: within one probe "
        f"interval, the {OPEN_WAIT_S:g} s open wait and {PROBE_CALL_S:g} s for the call)",
        f"  messages: {f.acked_before} acknowledged before the freeze, {f.lost_before} never "
        f"received ({ok['lost']}: 0); {f.acked} acknowledged in all, {f.lost} never received",
        f"  ListQueues every {PROBE_EVERY_S * 1000:.0f} ms from SIGSTOP to the end: "
        f"{f.probe.count} calls, p99 {f.probe.p99_ms:.1f} ms, max {f.probe.max_ms:.0f} ms, "
        f"{f.probe_errors} errors ({ok['probe']}: max under {PROBE_MAX_MS:g} ms, no error)",
        f"  whole run: {f.other_5xx} answers 5xx other than ServiceUnavailable, "
        f"{f.no_answer} attempts without an answer ({ok['5xx']}: 0)",
    ]
    return "\n".join(lines)


def run(phases: Phases) -> Figures:
    """The fleet, the load through every phase, the figures."""
    with fleet() as (endpoint, urls, pid):
        journal, marks = drive(endpoint, urls, pid, phases)
    return figures(journal, marks, phases)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the isolation benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.isolation", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter phases")
    args = parser.parse_args(argv)
    print(report(run(QUICK if args.quick else FULL)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
