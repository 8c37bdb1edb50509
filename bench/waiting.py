"""Many consumers waiting at once: do they all get their message, and what does the wait cost?

DMQ runs on DynamoDB Local behind the counting proxy (`bench/idle_cost.IdleServer`), so
every store request it makes is counted. `queues` queues are made, one consumer long-polls
each (and `shared` more wait on the first queue); once every poll is open, the store
requests of a quiet window are counted (target: no request per waiting consumer, at most
2 a second in all with the pump's own reads). Then one message is sent to each waiting
consumer, paced, and each consumer's poll must return it within that same wait: a poll
that ends empty although its message was sent during it is a missed wake-up.
Send-to-receipt time runs from the send's answer to the poll's answer. `run` measures
twice: behind the proxy for the store requests, then on the store itself for the times
and the memory (the proxy, one Python process, slows every store request).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from botocore.exceptions import BotoCoreError, ClientError

from bench.idle_cost import IdleServer
from bench.sqs import sqs_client

IDLE_TARGET_PER_S = 2.0
P99_TARGET_MS = 100.0
MEMORY_TARGET_KB = 50.0  # the server's growth per waiting consumer


@dataclass(frozen=True)
class Waits:
    """What the waiting consumers got, and what their wait cost."""

    consumers: int
    delivered: int
    missed: int  # polls that ended empty although their message was sent during them
    errors: dict[str, int]  # error code (or HTTP status) -> polls and sends that failed
    idle_per_s: float  # store requests per second while every consumer waited
    idle_by_operation: dict[str, int]
    latencies_ms: tuple[float, ...]
    rss_growth_kb_per_consumer: float | None
    thread_growth: int | None = None  # the server's threads while all wait, less before

    @property
    def server_errors(self) -> int:
        """Answers of 500 or more (and dropped connections)."""
        return sum(n for code, n in self.errors.items()
                   if not code.split(": ", 1)[-1].startswith("4"))

    def percentile(self, q: float) -> float:
        """Send-to-receipt time at this quantile, in ms (0 without deliveries)."""
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class _Poll:
    queue: int
    url: str
    sent_at: float | None = None  # when the send for this consumer was answered
    ended_at: float | None = None
    body: str | None = None
    error: str | None = None


def _status(pid: int, field: str) -> float | None:
    """A figure of the process's /proc status (None where /proc does not say)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def _rss_kb(pid: int) -> float | None:
    """The process's resident memory, in KB (None where /proc does not say)."""
    return _status(pid, "VmRSS")


def thread_count(pid: int) -> int | None:
    """The process's threads now."""
    threads = _status(pid, "Threads")
    return None if threads is None else int(threads)


def _code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        error = exc.response.get("Error", {})
        return f"{status} {error.get('Code', '')} {str(error.get('Message', ''))[:60]}".strip()
    return f"599 {type(exc).__name__}"


def _make_queues(endpoint: str, count: int, prefix: str, fifo: bool = False) -> list[str]:
    sqs = sqs_client(endpoint, 8, attempts=5)
    suffix, attributes = (".fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}) \
        if fifo else ("", {})
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(
            lambda n: str(sqs.create_queue(QueueName=f"{prefix}-{n}{suffix}",
                                           Attributes=attributes)["QueueUrl"]),
            range(count)))


# What the server does on its own, waiting or not: the stream pump's reads.
_BACKGROUND = frozenset({"GetRecords", "GetShardIterator", "DescribeStream", "ListStreams"})


def _settle(server: IdleServer, deadline: float, counted: bool) -> None:
    """Wait until the server has done all it was given (the stream pump has counted the
    queues just made, the polls have reached it and sleep): no request but the pump's
    reads for a second and a half (or the deadline; without the proxy, a pause). On a
    busy machine the counting of new queues can lag by seconds; it is work done once,
    not what waiting costs."""
    assert server.proxy is not None
    time.sleep(1.0)
    while counted and time.monotonic() < deadline:
        recent = server.proxy.by_operation(time.monotonic() - 1.5)
        if not set(recent) - _BACKGROUND:
            return
        time.sleep(0.25)


def measure(server: IdleServer, queues: int, shared: int = 0, wait_s: int = 20,
            window_s: float = 4.0, send_rate: float = 200.0, prefix: str = "dmq-wait",
            counted: bool = True, fifo: bool = False) -> Waits:
    """Open the polls, count a quiet window (`counted`: DMQ runs behind the proxy), send
    to each consumer, collect the answers. `fifo`: FIFO queues, each message a group of
    its own."""
    assert server.dmq is not None and server.proxy is not None
    endpoint, pid = server.dmq.url, server.dmq.process.pid
    urls = _make_queues(endpoint, queues, prefix, fifo)
    polls = [_Poll(n, url) for n, url in enumerate(urls)]
    polls += [_Poll(0, urls[0]) for _ in range(shared)]
    receiver = sqs_client(endpoint, len(polls) + 10, read_timeout=wait_s + 30, attempts=1)
    _settle(server, time.monotonic() + 30.0, counted)  # the queues' making is done
    rss_before, threads_before = _rss_kb(pid), thread_count(pid)

    def poll(p: _Poll) -> None:
        try:
            got = receiver.receive_message(QueueUrl=p.url, WaitTimeSeconds=wait_s)
            messages = got.get("Messages", [])
            p.body = str(messages[0]["Body"]) if messages else None
        except (BotoCoreError, ClientError) as exc:
            p.error = "receive: " + _code(exc)
        p.ended_at = time.monotonic()

    threads = [threading.Thread(target=poll, args=(p,), daemon=True) for p in polls]
    opened = time.monotonic()
    for thread in threads:
        thread.start()
    _settle(server, time.monotonic() + max(5.0, wait_s / 2), counted)
    start = time.monotonic()
    time.sleep(window_s if counted else 1.0)
    end = time.monotonic()
    idle = server.proxy.by_operation(start, end) if counted else {}
    rss_waiting, threads_waiting = _rss_kb(pid), thread_count(pid)
    sender = sqs_client(endpoint, 16, attempts=1)
    send_errors: Counter[str] = Counter()
    gap = 1.0 / send_rate if send_rate > 0 else 0.0

    def send(index: int, p: _Poll) -> None:
        time.sleep(max(0.0, first + index * gap - time.monotonic()))
        try:
            group = {"MessageGroupId": f"g{index}"} if fifo else {}
            sender.send_message(QueueUrl=p.url, MessageBody=f"for-{index}", **group)
            p.sent_at = time.monotonic()
        except (BotoCoreError, ClientError) as exc:
            send_errors["send: " + _code(exc)] += 1

    first = time.monotonic()
    last_possible = opened + wait_s - 1.0  # a send after this may miss the wait by design
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda ip: send(*ip), enumerate(polls)))
    for thread in threads:
        thread.join(timeout=wait_s + 40)
    errors = Counter(p.error for p in polls if p.error) + send_errors
    delivered = [p for p in polls if p.body is not None]
    by_body = {p.body: p for p in delivered}
    # Each consumer is sent one message to its queue (those sharing a queue: one each,
    # which any of them may get): a message sent during the wait and got by none is missed.
    missed = sum(1 for index, p in enumerate(polls)
                 if p.sent_at is not None and p.sent_at <= last_possible
                 and f"for-{index}" not in by_body)
    latencies = []
    for index, p in enumerate(polls):
        got_by = by_body.get(f"for-{index}")
        if got_by is not None and p.sent_at is not None and got_by.ended_at is not None:
            latencies.append(max(0.0, (got_by.ended_at - p.sent_at) * 1000))
    growth = (None if rss_before is None or rss_waiting is None
              else round((rss_waiting - rss_before) / max(1, len(polls)), 1))
    thread_growth = (None if threads_before is None or threads_waiting is None
                     else threads_waiting - threads_before)
    return Waits(len(polls), len(delivered), missed, dict(errors),
                 round(sum(idle.values()) / (end - start), 2), idle, tuple(latencies), growth,
                 thread_growth)


def report(waits: Waits, one: Waits | None = None) -> str:
    """The figures as a Markdown table, each against its target, beside the same run with
    one consumer on one queue when given."""
    def row(what: str, figure: Callable[[Waits], str], ok: bool, target: str) -> str:
        beside = f" {figure(one)} |" if one is not None else ""
        return f"| {what} | {figure(waits)} |{beside} {target} | {'PASS' if ok else 'FAIL'} |"

    def errors(w: Waits) -> str:
        named = ", ".join(f"{k}: {v}" for k, v in sorted(w.errors.items()))
        return f"{w.server_errors}" + (f" ({named})" if named else "")

    def growth(w: Waits) -> str:
        kb = w.rss_growth_kb_per_consumer
        return "not measured" if kb is None else f"{kb:.1f} KB"

    kb = waits.rss_growth_kb_per_consumer
    head = f"| {waits.consumers:,} waiting consumers | figure |"
    return "\n".join([
        head + (f" {one.consumers} consumer |" if one is not None else "") + " target | |",
        "|---|---|" + ("---|" if one is not None else "") + "---|---|",
        row("delivered in the same wait",
            lambda w: f"{w.delivered} of {w.consumers}, {w.missed} missed",
            waits.missed == 0, "0 missed"),
        row("answers of 500 or more", errors, waits.server_errors == 0, "0"),
        row("send-to-receipt p50 / p99",
            lambda w: f"{w.percentile(0.5):.1f} / {w.percentile(0.99):.1f} ms",
            waits.percentile(0.99) <= P99_TARGET_MS, f"p99 <= {P99_TARGET_MS:g} ms"),
        row("store requests a second while all wait",
            lambda w: f"{w.idle_per_s:.2f} ("
            + (", ".join(f"{k} {v}" for k, v in w.idle_by_operation.items()) or "none") + ")",
            waits.idle_per_s <= IDLE_TARGET_PER_S, f"<= {IDLE_TARGET_PER_S:g}"),
        row("server memory per waiting consumer", growth,
            kb is not None and kb <= MEMORY_TARGET_KB, f"<= {MEMORY_TARGET_KB:g} KB"),
        row("server threads added while all wait",
            lambda w: "not measured" if w.thread_growth is None else f"{w.thread_growth}",
            waits.thread_growth is not None and waits.thread_growth < waits.consumers / 10,
            "no thread per wait"),
    ])


def run(queues: int, shared: int, rate: float) -> Waits:
    """On servers of its own, twice: behind the counting proxy, for the store requests
    made while everyone waits, then on the store itself (the proxy, one Python process,
    slows every store request), for the time to receipt and the memory. A miss or an
    error in either run counts."""
    server = IdleServer()
    try:
        server.start()
        counted = measure(server, queues, shared, send_rate=rate)
        server.start_dmq(counted=False)
        direct = measure(server, queues, shared, send_rate=rate, prefix="dmq-wait-direct",
                         counted=False)  # new queues: the first run's messages are in flight
    finally:
        server.stop()
    errors = Counter(counted.errors) + Counter(direct.errors)
    return replace(direct, missed=counted.missed + direct.missed, errors=dict(errors),
                   idle_per_s=counted.idle_per_s, idle_by_operation=counted.idle_by_operation)


def main(argv: Sequence[str] | None = None) -> Waits:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.waiting", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=1000, help="one consumer each")
    parser.add_argument("--shared", type=int, default=200, help="more consumers on one queue")
    parser.add_argument("--rate", type=float, default=200.0, help="sends a second")
    args = parser.parse_args(argv)
    print(f"waiting consumers: {args.queues} queues, {args.shared} more on one ...", flush=True)
    waits = run(args.queues, args.shared, args.rate)
    print("\n" + report(waits) + "\n", flush=True)
    return waits


if __name__ == "__main__":
    main()
