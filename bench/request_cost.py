"""What one SQS call costs DMQ's store, in requests, latency and dollars.

DMQ's local server runs with default settings on DynamoDB Local (its database on disk,
as `make run` keeps it), first behind a counting proxy (`bench/store_proxy.py`), so
every store request is counted at the store boundary whichever client made it: the
request path's, the stream pump's (GetRecords, DescribeStream, the count updates it
writes), the timers'. Four measurements, in one run:

1. Store requests per call. The idle request rate is counted first. Then each phase
   (SendMessage x N on a fresh queue, ReceiveMessage(1) x N of those messages,
   DeleteMessage x N of them, N = 200; then the same in batches of ten on another fresh
   queue, with 1,000 messages)
   starts once the server is quiet and is counted until it is quiet again: no request
   but an empty GetRecords for 1.5 s (bounded). The figures are given for the request
   path, for every billed (item) request, and for every request, raw and net of the idle
   rate times the phase's window. The per-call targets apply to the path; the batched
   lifecycle's to the billed requests, background included.
2. Single-call latency. DMQ is restarted on the store directly (no proxy); one client
   makes SendMessage, ReceiveMessage(1) and DeleteMessage one at a time, interleaved in
   blocks with the store's own PutItem, Query of one, claim UpdateItem and DeleteItem on
   the same DynamoDB Local (`bench/floor.py`), both through the same lean HTTP client;
   the p50s are compared, and DMQ's own time (its p50 less the store call's) is judged.
   DMQ's calls through boto3 are timed beside them: botocore's own time per call, about
   a millisecond, is the caller's, and the store calls are not timed through it.
3. Lifecycle throughput: `bench/throughput.py`'s lifecycle (4 producers, 4 consumers,
   batches of ten) against `bench/floor.py`'s, on the same store, each once DMQ's
   background work from the phase before is done.
4. Dollars per million messages: DynamoDB's on-demand request units, computed from the
   per-operation counts and item counts of part 1, beside SQS's price per request.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import floor
from bench.counting import NoCounter
from bench.idle_cost import IdleServer
from bench.servers import wait_idle
from bench.sqs import BATCH, body, entries, lean_sqs_client, preload, sqs_client
from bench.store_proxy import CountingProxy, StoreCall
from bench.throughput import ThroughputConfig, ThroughputResult, run_throughput
from bench.timing import Latency, Recorder

# Targets: store requests per call on the request path.
SEND_TARGET, RECEIVE_TARGET, DELETE_TARGET = 1.1, 2.1, 1.1
# Per message, send + receive + delete in batches of ten: billed requests, background
# included.
BATCHED_TARGET = 0.45
# Targets: a single call's p50 over the p50 of the store call it makes (a receive's is
# its claim, issue #33: within 2x of one store round trip); lifecycle DMQ over the store.
SINGLE_RATIO = 2.0
# Target: DMQ's own time per single call, its p50 less the p50 of the store call it makes.
OWN_TARGET_MS = 1.5
LIFECYCLE_RATIO = 0.85

# Prices: AWS's public price lists, us-east-1, as of November 2024 (DynamoDB on-demand
# prices since the cut of 1 November 2024; SQS standard queues, past the free tier).
DYNAMODB_PER_MILLION_WRU = 0.625
DYNAMODB_PER_MILLION_RRU = 0.125
SQS_PER_MILLION_REQUESTS = 0.40  # a request carries up to 64 KB; a batch of ten is one

QUIET_S = 1.5  # a phase ends once nothing but empty GetRecords came for this long
SETTLE_TIMEOUT_S = 30.0
VISIBILITY_S = 600  # received messages stay in flight until their delete phase
BODY_BYTES = 256
BACKLOG = 100  # what the latency queue holds, as in `bench/single_ops.py`
SEND, RECEIVE, DELETE = "SendMessage", "ReceiveMessage", "DeleteMessage"
BOTO3 = " (boto3)"  # DMQ's calls timed through boto3's SQS client
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})


@dataclass(frozen=True)
class Units:
    """DynamoDB request units: writes (WRU) and reads (RRU)."""

    wru: float = 0.0
    rru: float = 0.0

    def __add__(self, other: Units) -> Units:
        return Units(self.wru + other.wru, self.rru + other.rru)

    def scaled(self, factor: float) -> Units:
        """These units times `factor`."""
        return Units(self.wru * factor, self.rru * factor)


def call_units(call: StoreCall) -> Units:
    """On-demand units of one request, its items taken to be at most 1 KB each: a write
    1 WRU per item, 2 in a transaction; a read 0.5 RRU per 4 KB eventually consistent, 1
    consistent, 2 in a transaction. Stream reads and table calls are not item reads."""
    op, read = call.operation, 1.0 if call.consistent else 0.5
    if op in _WRITES:
        return Units(wru=1.0)
    if op == "BatchWriteItem":
        return Units(wru=float(call.items))
    if op == "TransactWriteItems":
        return Units(wru=2.0 * call.items)
    if op == "GetItem":
        return Units(rru=read)
    if op == "BatchGetItem":
        return Units(rru=read * call.items)
    if op in ("Query", "Scan"):  # the items read, summed and rounded up to 4 KB
        return Units(rru=read * max(1, math.ceil(call.items / 4)))
    if op == "TransactGetItems":
        return Units(rru=2.0 * call.items)
    return Units()


def units_of(calls: Iterable[StoreCall]) -> Units:
    """The units of many requests."""
    total = Units()
    for call in calls:
        total += call_units(call)
    return total


@dataclass(frozen=True)
class IdleRate:
    """The requests of a quiet server over a window."""

    seconds: float
    by_operation: dict[str, int]
    units: Units

    @property
    def per_second(self) -> float:
        """Requests per second."""
        return sum(self.by_operation.values()) / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Phase:
    """One phase's calls and the store requests counted from its start to its settle."""

    name: str
    calls: int  # SQS calls made
    messages: int  # messages sent, received or deleted
    seconds: float  # the counted window: the calls and the settle after them
    by_operation: dict[str, int]
    units: Units
    idle_requests: float  # the idle rate times the window
    settled: bool  # False: the server was still busy when the settle's bound ran out
    path_requests: int = 0  # those the calls made themselves (see `on_request_path`)
    billed_requests: int = 0  # item requests, background's included (see `is_billed`)

    @property
    def requests(self) -> int:
        """Every store request in the window."""
        return sum(self.by_operation.values())

    def per_path(self) -> float:
        """Requests on the request path per call."""
        return self.path_requests / self.calls if self.calls else float("inf")

    def per(self, unit: str, net: bool = False) -> float:
        """Requests per call or per message ("call", "message"); `net` of idle."""
        count = self.calls if unit == "call" else self.messages
        total = self.requests - (self.idle_requests if net else 0.0)
        return total / count if count else float("inf")


@dataclass(frozen=True)
class RequestCounts:
    """Part 1: the idle rate and the six phases."""

    idle: IdleRate
    send: Phase
    receive: Phase
    delete: Phase
    send_batch: Phase
    receive_batch: Phase
    delete_batch: Phase

    @property
    def single(self) -> tuple[Phase, Phase, Phase]:
        """One message per call: send, receive, delete."""
        return self.send, self.receive, self.delete

    @property
    def batched(self) -> tuple[Phase, Phase, Phase]:
        """Batches of ten: send, receive, delete."""
        return self.send_batch, self.receive_batch, self.delete_batch


def billed_per_message(phases: Sequence[Phase]) -> float:
    """Billed store requests (`is_billed`) per message over send + receive + delete."""
    messages = min(p.messages for p in phases)
    return sum(p.billed_requests for p in phases) / messages if messages else float("inf")


def lifecycle_per_message(phases: Sequence[Phase], net: bool = False) -> float:
    """Store requests per message over send + receive + delete phases."""
    messages = min(p.messages for p in phases)
    total = sum(p.requests - (p.idle_requests if net else 0.0) for p in phases)
    return total / messages if messages else float("inf")


def request_checks(counts: RequestCounts) -> list[tuple[str, float, float]]:
    """(figure, measured, most allowed) for each per-call target: the requests the calls
    made themselves, on the request path."""
    return [
        ("SendMessage store requests per call", counts.send.per_path(), SEND_TARGET),
        ("ReceiveMessage(1) store requests per call", counts.receive.per_path(),
         RECEIVE_TARGET),
        ("DeleteMessage store requests per call", counts.delete.per_path(), DELETE_TARGET),
    ]


def batched_check(counts: RequestCounts) -> tuple[str, float, float]:
    """The batched lifecycle's figure: the billed requests, background included."""
    return ("batched lifecycle billed store requests per message",
            billed_per_message(counts.batched), BATCHED_TARGET)


_NOT_ON_PATH = frozenset({"GetRecords", "GetShardIterator", "DescribeStream", "ListStreams",
                          "DescribeTable", "ListTables", "DescribeTimeToLive"})


def is_billed(call: StoreCall) -> bool:
    """Whether DynamoDB bills a request by the request: an item request, whoever made
    it. Stream reads are free to the Lambda triggers that make them on AWS (the local
    pump stands in for those), and table calls are free."""
    return call.operation not in _NOT_ON_PATH


def on_request_path(call: StoreCall) -> bool:
    """Whether a request is one an SQS call makes itself: an item request on a messages
    or queues table. The stream pump's reads, the count updates it writes (control
    table), table listings and the timers' control-table reads are background."""
    return call.operation not in _NOT_ON_PATH and any(
        t.startswith(("dmq-messages", "dmq-queues")) for t in call.tables)


def _idle_kind(call: StoreCall) -> bool:
    """What an idle server does: poll its streams and find nothing."""
    return call.operation == "GetRecords" and not call.records


def settle(proxy: CountingProxy, since: float, quiet_s: float = QUIET_S,
           timeout_s: float = SETTLE_TIMEOUT_S) -> tuple[float, bool]:
    """Wait until nothing but empty GetRecords has reached the store for `quiet_s` (the
    last busy request counted from `since`); return when, and whether it got quiet."""
    started = time.monotonic()
    while True:
        now = time.monotonic()
        last = max((c.at for c in proxy.calls(since) if not _idle_kind(c)), default=since)
        if now - last >= quiet_s:
            return now, True
        if now - started >= timeout_s:
            return now, False
        time.sleep(0.1)


def measure_idle(proxy: CountingProxy, window_s: float) -> IdleRate:
    """Settle, then count a quiet window."""
    settle(proxy, time.monotonic())
    start = time.monotonic()
    time.sleep(window_s)
    end = time.monotonic()
    return IdleRate(round(end - start, 2), proxy.by_operation(start, end),
                    units_of(proxy.calls(start, end)))


def run_phase(proxy: CountingProxy, idle: IdleRate, name: str,
              work: Callable[[], tuple[int, int]]) -> Phase:
    """Settle, run `work` (it returns calls made and messages moved), settle again, and
    count every store request from its start to the end of that settle."""
    settle(proxy, time.monotonic())
    start = time.monotonic()
    calls, messages = work()
    end, settled = settle(proxy, start)
    window = proxy.calls(start, end)
    seconds = end - start
    return Phase(name, calls, messages, round(seconds, 2),
                 dict(sorted(Counter(c.operation for c in window).items())),
                 units_of(window), idle.per_second * seconds, settled,
                 sum(1 for c in window if on_request_path(c)),
                 sum(1 for c in window if is_billed(c)))


class _Queue:
    """One queue's SQS calls for the request phases; keeps the receipt handles."""

    def __init__(self, sqs: Any, name: str) -> None:
        self.sqs = sqs
        self.url = str(sqs.create_queue(QueueName=name)["QueueUrl"])
        self.handles: list[str] = []

    def send(self, messages: int) -> tuple[int, int]:
        for number in range(messages):
            self.sqs.send_message(QueueUrl=self.url, MessageBody=body(number, BODY_BYTES))
        return messages, messages

    def send_batches(self, messages: int) -> tuple[int, int]:
        calls = sent = 0
        for first in range(0, messages, BATCH):
            answer = self.sqs.send_message_batch(
                QueueUrl=self.url, Entries=entries(first, min(BATCH, messages - first),
                                                   BODY_BYTES))
            calls, sent = calls + 1, sent + len(answer.get("Successful", []))
        return calls, sent

    def receive(self, messages: int, per_call: int) -> tuple[int, int]:
        calls, bound = 0, 2 * math.ceil(messages / per_call) + 10
        while len(self.handles) < messages and calls < bound:
            got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=per_call,
                                           VisibilityTimeout=VISIBILITY_S, WaitTimeSeconds=0)
            self.handles += [m["ReceiptHandle"] for m in got.get("Messages", [])]
            calls += 1
        return calls, len(self.handles)

    def delete(self) -> tuple[int, int]:
        for handle in self.handles:
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=handle)
        return len(self.handles), len(self.handles)

    def delete_batches(self) -> tuple[int, int]:
        calls = deleted = 0
        for first in range(0, len(self.handles), BATCH):
            chunk = self.handles[first:first + BATCH]
            answer = self.sqs.delete_message_batch(QueueUrl=self.url, Entries=[
                {"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(chunk)])
            calls, deleted = calls + 1, deleted + len(answer.get("Successful", []))
        return calls, deleted


def measure_requests(server: IdleServer, messages: int = 200,
                     idle_window_s: float = 5.0,
                     batched_messages: int | None = None) -> RequestCounts:
    """Part 1 on a started server (DMQ on the proxy): the idle rate, then the phases
    (`batched_messages` in each batched phase: `messages` unless given)."""
    assert server.dmq is not None and server.proxy is not None
    proxy, sqs = server.proxy, sqs_client(server.dmq.url)
    idle = measure_idle(proxy, idle_window_s)
    stamp = int(time.time())
    one = _Queue(sqs, f"dmq-request-cost-one-{stamp}")
    send = run_phase(proxy, idle, f"SendMessage x{messages}", lambda: one.send(messages))
    receive = run_phase(proxy, idle, f"ReceiveMessage(1) x{messages}",
                        lambda: one.receive(messages, 1))
    delete = run_phase(proxy, idle, f"DeleteMessage x{len(one.handles)}", one.delete)
    ten = _Queue(sqs, f"dmq-request-cost-ten-{stamp}")
    in_tens = messages if batched_messages is None else batched_messages
    batches = math.ceil(in_tens / BATCH)
    send_batch = run_phase(proxy, idle, f"SendMessageBatch(10) x{batches}",
                           lambda: ten.send_batches(in_tens))
    receive_batch = run_phase(proxy, idle, "ReceiveMessage(10)",
                              lambda: ten.receive(in_tens, BATCH))
    delete_batch = run_phase(proxy, idle, "DeleteMessageBatch(10)", ten.delete_batches)
    return RequestCounts(idle, send, receive, delete, send_batch, receive_batch,
                         delete_batch)


@dataclass(frozen=True)
class LatencyPair:
    """One SQS call's p50 against the p50 of one store call alone: the call DMQ makes for
    it (`judged`), or another shown beside it."""

    call: str
    store_call: str
    dmq: Latency  # through the lean client, as the store call is timed
    store: Latency
    target: float
    judged: bool = True
    dmq_boto3: Latency | None = None  # the same call through boto3's SQS client

    @property
    def ratio(self) -> float:
        """DMQ's p50 over the store call's."""
        return self.dmq.p50_ms / self.store.p50_ms if self.store.p50_ms else float("inf")

    @property
    def own_ms(self) -> float:
        """DMQ's own time: its p50 less the store call's."""
        return self.dmq.p50_ms - self.store.p50_ms

    @property
    def passed(self) -> bool:
        """Within both the ratio and the own-time target."""
        return self.ratio <= self.target and self.own_ms <= OWN_TARGET_MS


def _dmq_rounds(sqs: Any, url: str, rounds: int, recorder: Recorder,
                suffix: str = "") -> None:
    """Rounds of send one, receive one (no wait), delete it, one call at a time (timed
    under SEND, RECEIVE and DELETE with `suffix`)."""
    for number in range(rounds):
        with recorder.timed(SEND + suffix):
            sqs.send_message(QueueUrl=url, MessageBody=body(number, BODY_BYTES))
        started = time.perf_counter()
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                  WaitTimeSeconds=0).get("Messages", [])
        recorder.add(RECEIVE + suffix, time.perf_counter() - started)
        if got:
            with recorder.timed(DELETE + suffix):
                sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])


def measure_latency(dmq_url: str, store: str, rounds: int,
                    blocks: int = 3) -> list[LatencyPair]:
    """Part 2: DMQ's single calls and the store's single calls, in interleaved blocks
    after a warm-up of each (DMQ's queue holds BACKLOG messages throughout). The store
    calls and DMQ's judged calls go through the same lean client (the one DMQ's own store
    calls use), so the difference is DMQ's own time, not a client's; DMQ's calls through
    boto3 are timed beside them."""
    sqs, lean = sqs_client(dmq_url), lean_sqs_client(dmq_url)
    url = str(sqs.create_queue(QueueName=f"dmq-request-cost-latency-{int(time.time())}")
              ["QueueUrl"])
    preload(dmq_url, url, BACKLOG, BODY_BYTES)
    warm_up = max(5, rounds // 10)
    floor.store_round_trips(store, warm_up, Recorder())
    _dmq_rounds(lean, url, warm_up, Recorder())
    _dmq_rounds(sqs, url, warm_up, Recorder())
    recorder = Recorder()
    for block in range(blocks):
        share = rounds // blocks + (1 if block < rounds % blocks else 0)
        floor.store_round_trips(store, share, recorder)
        _dmq_rounds(lean, url, share, recorder)
        _dmq_rounds(sqs, url, share, recorder, BOTO3)

    def pair(call: str, name: str, store_call: str, label: str,
             judged: bool = True) -> LatencyPair:
        return LatencyPair(call, label, recorder.summary(name), recorder.summary(store_call),
                           SINGLE_RATIO, judged, recorder.summary(name + BOTO3))

    return [
        pair(SEND, SEND, floor.PUT_ITEM, floor.PUT_ITEM),
        pair("ReceiveMessage(1)", RECEIVE, floor.CLAIM, "claim UpdateItem"),
        pair("ReceiveMessage(1)", RECEIVE, floor.QUERY, "Query of one", judged=False),
        pair(DELETE, DELETE, floor.DELETE_ITEM, floor.DELETE_ITEM),
    ]


@dataclass(frozen=True)
class LifecyclePair:
    """Part 3: DMQ's lifecycle against the store's floor, on the same store."""

    dmq: ThroughputResult
    floor_messages: int
    floor_seconds: float

    @property
    def floor_per_s(self) -> float:
        """The floor's messages per second."""
        return self.floor_messages / self.floor_seconds if self.floor_seconds else 0.0

    @property
    def ratio(self) -> float:
        """DMQ's messages per second over the floor's."""
        return self.dmq.messages_per_s / self.floor_per_s if self.floor_per_s else 0.0


def measure_lifecycle(dmq_url: str, store: str, messages: int, producers: int = 4,
                      consumers: int = 4, settle: Callable[[], object] = lambda: None,
                      ) -> LifecyclePair:
    """The floor's lifecycle (after its warm-up), then DMQ's, the same size; each after
    `settle` (DMQ's background work from what came before is done)."""
    settle()
    done, seconds = floor.lifecycle_rate(store, messages, producers, consumers)
    settle()
    result = run_throughput(dmq_url, NoCounter(), ThroughputConfig(
        messages=messages, producers=producers, consumers=consumers,
        body_bytes=BODY_BYTES, timeout_s=300.0,
        queue_name=f"dmq-request-cost-lifecycle-{int(time.time())}"))
    return LifecyclePair(result, done, seconds)


@dataclass(frozen=True)
class Cost:
    """What one workload costs per message, and so per million messages."""

    label: str
    requests: float  # DynamoDB requests per message, every kind
    units: Units  # DynamoDB request units per message
    sqs_requests: float  # SQS requests per message

    @property
    def dynamodb_dollars(self) -> float:
        """On-demand dollars per million messages."""
        return (self.units.wru * DYNAMODB_PER_MILLION_WRU
                + self.units.rru * DYNAMODB_PER_MILLION_RRU)

    @property
    def sqs_dollars(self) -> float:
        """SQS standard dollars per million messages."""
        return self.sqs_requests * SQS_PER_MILLION_REQUESTS


def cost_of(label: str, phases: Sequence[Phase]) -> Cost:
    """Per message over send + receive + delete phases (raw counts, background included)."""
    messages = max(min(p.messages for p in phases), 1)
    units = Units()
    for phase in phases:
        units += phase.units
    return Cost(label, sum(p.requests for p in phases) / messages, units.scaled(1 / messages),
                sum(p.calls for p in phases) / messages)


@dataclass(frozen=True)
class RequestCost:
    """Everything one run measured."""

    counts: RequestCounts
    latency: list[LatencyPair]
    lifecycle: LifecyclePair | None


def _verdict(passed: bool) -> str:
    return "PASS" if passed else "**FAIL**"


def _operations(phase: Phase, unit: str) -> str:
    count = phase.calls if unit == "call" else phase.messages
    return ", ".join(f"{op} {n / max(count, 1):.2f}" for op, n in phase.by_operation.items())


def _phase_row(phase: Phase, unit: str, target: float | None) -> str:
    count = phase.calls if unit == "call" else phase.messages
    path = phase.path_requests / max(count, 1)
    verdict = "-" if target is None else _verdict(path <= target)
    quiet = "" if phase.settled else f", not quiet after {SETTLE_TIMEOUT_S:g} s"
    return (f"| {phase.name} ({phase.messages} messages, {phase.seconds:.1f} s{quiet}) "
            f"| {path:.2f} | {phase.billed_requests / max(count, 1):.2f} "
            f"| {phase.per(unit):.2f} | {phase.per(unit, True):.2f} "
            f"| {_operations(phase, unit)} "
            f"| {'-' if target is None else f'<= {target:g}'} | {verdict} |")


def requests_table(counts: RequestCounts) -> list[str]:
    """Part 1 as Markdown."""
    idle = counts.idle
    ops = ", ".join(f"{op} {n}" for op, n in idle.by_operation.items()) or "none"
    lines = [
        "**Store requests per SQS call**, counted at a proxy in front of DynamoDB Local. "
        "'Path': the requests the calls made themselves (item requests on the messages "
        "and queues tables). 'Billed': every item request in the phase, background "
        "included (the path's, the count updates the stream handler writes, the timers' "
        "reads), which DynamoDB bills by the request. 'All': every request in the phase, "
        "also the stream pump's reads (free on AWS, where Lambda triggers read the "
        "streams) and table calls (free). Each phase starts on a quiet server and is "
        "counted until the server is quiet again (no request but an empty GetRecords for "
        f"{QUIET_S:g} s). Idle rate, counted first: {idle.per_second:.2f} requests/s over "
        f"{idle.seconds:g} s ({ops}); 'net' subtracts it times the phase's window. The "
        "per-call targets apply to 'path'; the batched lifecycle's, background included, "
        "to 'billed'. The pump's reads are paced by time (a pass every 0.2 s while records "
        "come), so their share per call falls as the call rate rises; one client one call "
        "at a time behind the proxy is their worst case.",
        "",
        "| phase | path | billed | all | all, net of idle | by operation (all) | target "
        "| PASS/FAIL |",
        "|---|---:|---:|---:|---:|---|---|---|",
        "| *per call* | | | | | | | |",
    ]
    for phase, target in zip(counts.single, (SEND_TARGET, RECEIVE_TARGET, DELETE_TARGET),
                             strict=True):
        lines.append(_phase_row(phase, "call", target))
    lines.append("| *per message, batches of ten* | | | | | | | |")
    lines += [_phase_row(phase, "message", None) for phase in counts.batched]
    raw, net = (lifecycle_per_message(counts.batched, n) for n in (False, True))
    path = sum(p.path_requests for p in counts.batched) / max(
        min(p.messages for p in counts.batched), 1)
    billed = billed_per_message(counts.batched)
    lines.append(f"| lifecycle in tens: send + receive + delete | {path:.2f} | {billed:.2f} "
                 f"| {raw:.2f} | {net:.2f} | - | <= {BATCHED_TARGET:g} (billed) "
                 f"| {_verdict(billed <= BATCHED_TARGET)} |")
    return lines


def latency_table(pairs: list[LatencyPair]) -> list[str]:
    """Part 2 as Markdown."""
    rounds = pairs[0].dmq.count if pairs else 0
    lines = [
        f"**Single calls against the store's own round trip**: {rounds} rounds, one client, "
        "one call at a time, DMQ on the store directly (no proxy), interleaved in blocks "
        "with the store calls alone on the same DynamoDB Local. DMQ's calls and the store's "
        "go through the same lean HTTP client (the one DMQ's store calls use), so neither "
        "carries botocore's client time; DMQ's calls through boto3 are shown beside them. "
        "Each call is judged against the store call it makes (a single receive claims a "
        "message it already knows of with one conditional UpdateItem; a Query of ten every "
        "tenth call, shown beside it); DMQ's own time is its p50 less the store's.",
        "",
        "| call | DMQ p50 ms | through boto3 | store call alone | store p50 ms | ratio "
        "| DMQ's own time | target | PASS/FAIL |",
        "|---|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for p in pairs:
        target = f"<= {p.target:g}x; own <= {OWN_TARGET_MS:g} ms" if p.judged else "-"
        verdict = _verdict(p.passed) if p.judged else "-"
        boto3 = f"{p.dmq_boto3.p50_ms:.2f}" if p.dmq_boto3 is not None else "-"
        lines.append(f"| {p.call} | {p.dmq.p50_ms:.2f} | {boto3} | {p.store_call} | "
                     f"{p.store.p50_ms:.2f} | {p.ratio:.2f}x | {p.own_ms:.2f} ms | {target} "
                     f"| {verdict} |")
    return lines


def lifecycle_table(pair: LifecyclePair) -> list[str]:
    """Part 3 as Markdown."""
    dmq = pair.dmq
    return [
        f"**Lifecycle against the store's floor**: {dmq.producers} producers and "
        f"{dmq.consumers} consumers, batches of ten, on the same DynamoDB Local; DMQ "
        f"delivered {dmq.delivered:,} of {dmq.sent:,} in {dmq.seconds:.1f} s, the floor "
        f"(`bench/floor.py`) {pair.floor_messages:,} in {pair.floor_seconds:.1f} s.",
        "",
        "| figure | DMQ | store alone | ratio | target | PASS/FAIL |",
        "|---|---:|---:|---:|---|---|",
        f"| lifecycle messages/s | {dmq.messages_per_s:.1f} | {pair.floor_per_s:.1f} "
        f"| {pair.ratio:.2f}x | >= {LIFECYCLE_RATIO:g}x | "
        f"{_verdict(pair.ratio >= LIFECYCLE_RATIO)} |",
    ]


def cost_table(counts: RequestCounts) -> list[str]:
    """Part 4 as Markdown."""
    costs = [cost_of("one message a call (send, receive 1, delete)", counts.single),
             cost_of("batches of ten", counts.batched)]
    lines = [
        "**Cost per million messages** (sent, received and deleted), from the raw counts "
        "above (background included, idle not subtracted). DynamoDB on-demand, us-east-1 "
        f"(price list of November 2024): ${DYNAMODB_PER_MILLION_WRU:.3f} per million write "
        f"request units, ${DYNAMODB_PER_MILLION_RRU:.3f} per million read request units. "
        "Assumed: every item at most 1 KB (a 256-byte body and its attributes), so a "
        "write is 1 WRU per item and 2 in a transaction, a read 0.5 RRU per 4 KB (1 "
        "consistent, 2 in a transaction), a Query of n items at most ceil(n/4) of those. "
        "Not priced: stream reads (DMQ on AWS reads its streams through Lambda triggers, "
        "which DynamoDB does not charge for) and table calls; nor the writes to the "
        "visibility index, which DynamoDB bills as more WRUs, so the DynamoDB dollars are "
        f"a lower bound. SQS standard: ${SQS_PER_MILLION_REQUESTS:.2f} per million requests "
        "(the SQS calls this run made, a batch being one request).",
        "",
        "| per million messages | DynamoDB requests | WRU | RRU | DynamoDB $ "
        "| SQS requests | SQS $ |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {c.label} | {c.requests * 1e6:,.0f} | {c.units.wru * 1e6:,.0f} "
              f"| {c.units.rru * 1e6:,.0f} | {c.dynamodb_dollars:.2f} "
              f"| {c.sqs_requests * 1e6:,.0f} | {c.sqs_dollars:.2f} |" for c in costs]
    return lines


def report(result: RequestCost) -> str:
    """Every part as Markdown."""
    lines = [*requests_table(result.counts), "", *latency_table(result.latency), ""]
    if result.lifecycle is not None:
        lines += [*lifecycle_table(result.lifecycle), ""]
    return "\n".join([*lines, *cost_table(result.counts)])


def measure(messages: int, rounds: int, lifecycle_messages: int,
            idle_window_s: float, batched_messages: int | None = None) -> RequestCost:
    """Start the store, the proxy and DMQ on it; part 1; DMQ again on the store
    directly; parts 2 and 3; stop everything."""
    server = IdleServer(on_disk=True)
    try:
        server.start()
        counts = measure_requests(server, messages, idle_window_s, batched_messages)
        dmq = server.start_dmq(counted=False)
        wait_idle(dmq.process.pid, timeout_s=SETTLE_TIMEOUT_S)
        store = server.store.endpoint
        floor.provision_tables(store)
        latency = measure_latency(dmq.url, store, rounds)
        lifecycle = (measure_lifecycle(
            dmq.url, store, lifecycle_messages,
            settle=lambda: wait_idle(dmq.process.pid, timeout_s=SETTLE_TIMEOUT_S))
            if lifecycle_messages else None)
    finally:
        server.stop()
    return RequestCost(counts, latency, lifecycle)


def main(argv: Sequence[str] | None = None) -> RequestCost:
    """Measure and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.request_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200,
                        help="messages in each one-a-call request-count phase (default 200)")
    parser.add_argument("--batched-messages", type=int, default=1000,
                        help="messages in each batched request-count phase (default 1000)")
    parser.add_argument("--rounds", type=int, default=300,
                        help="single-call latency rounds (default 300)")
    parser.add_argument("--lifecycle-messages", type=int, default=4000,
                        help="messages in each lifecycle run (default 4000; 0 skips it)")
    parser.add_argument("--idle-window", type=float, default=5.0,
                        help="seconds the idle rate is counted over (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="50 messages (200 batched), 30 rounds, 400 lifecycle messages")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.batched_messages = 50, 200
        args.rounds, args.lifecycle_messages = 30, 400
    print("request cost: DMQ on DynamoDB Local behind a counting proxy ...", flush=True)
    result = measure(args.messages, args.rounds, args.lifecycle_messages, args.idle_window,
                     args.batched_messages)
    print("\n" + report(result) + "\n", flush=True)
    return result


if __name__ == "__main__":
    main()
