"""A million messages in one queue: what a deep standard queue costs the local server.

One DMQ server (`python -m dmqlocal`, its default store: DynamoDB Local under a fresh
data folder) on a free loopback port, with three standard queues: `deep`, filled with N
messages of 256 bytes; `shallow`, with 1,000 more than the receives take from it (so that
it holds 1,000 to the end); and `empty`. The messages are written
straight into DynamoDB Local's messages table with BatchWriteItem, as items made by
DMQ's own item codec (`bench.stop_time.fill`, `chalicelib.backend.items.to_item`); the
server's stream pump counts them in as it counts sends (the count item in the control
table is the pump's, never written here), and the bench waits until GetQueueAttributes
shows all N. Then:

- one SIGTERM, timed until the process exits (target: at most 2 s);
- a restart on the same data folder, timed from the spawn until the first answer (a
  ListQueues; target: within 5 s), beside a start on an empty data folder on the same
  machine (the floor: Python, the app and DynamoDB Local's JVM);
- after the restart, ReceiveMessage (10 at most, no wait) p50 on `deep` against the same
  receive on `shallow`, and GetQueueAttributes p50 on `deep` against `empty`,
  interleaved (target: within 1.2x). A receive is judged against `shallow` because it
  does the same work there (it claims ten messages); a receive from `empty` claims
  nothing, and is shown beside it;
- every message still there: visible plus in flight is N (plus what `shallow` holds);
- then PurgeQueue on `deep`: its answer timed (target: within 1 s), a receive right after
  it (it must find nothing), and the time until the queue's counts show no message
  (target: within 60 s, as SQS's purge; the removal runs in the background), and the
  time until the store itself holds none of the queue's messages (a Query of one item on
  the queue's partition in DynamoDB Local, every 2 s; target: within 60 s);
- before the purge, the store's own floor for that removal: 20,000 more messages in a
  queue of their own, filled and then deleted straight in DynamoDB Local as fast as it
  takes them (pages of 1,000 keys, 25 deletes to a BatchWriteItem, eight writers;
  `bench.stop_time.empty`), and the time the deep queue's messages would take at that
  rate: no removal through the store's API can beat it.

    python -m bench.deep_queue [--messages 1000000] [--calls 200] [--json FILE]
                               [--purge-wait SECONDS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.servers import Server, start_dmq, wait_idle
from bench.sqs import sqs_client
from bench.stop_time import empty, fill, sigterm, store_client, store_endpoint
from bench.timing import percentile
from chalicelib.backend.items import partition_key
from chalicelib.settings import Settings

MESSAGES = 1_000_000
SHALLOW = 1_000
RECEIVED = 10  # messages a receive asks for
CALLS = 200
BODY_BYTES = 256
RESTART_TARGET_S = 5.0
STOP_TARGET_S = 2.0
P50_RATIO = 1.2
SETTLE_TIMEOUT_S = 1800.0
COUNT_TIMEOUT_S = 600.0
VISIBILITY_S = 3600
PURGE_ANSWER_S = 1.0
PURGE_GONE_S = 60.0
FLOOR_MESSAGES = 20_000


@dataclass(frozen=True)
class DeepResult:
    """What one run measured."""

    messages: int
    fill_s: float
    fill_rate: float
    settle_s: float
    stop_s: float | None  # None: it did not exit in time and was killed
    restart_s: float
    empty_start_s: float
    receive_p50_ms: float
    receive_empty_p50_ms: float
    receive_shallow_p50_ms: float
    attributes_p50_ms: float
    attributes_empty_p50_ms: float
    stored_after: int  # visible plus in flight in `deep` after the restart and the calls
    returned: int  # messages the receives from `deep` returned
    purge_answer_s: float
    received_after_purge: int  # messages a receive right after the purge returned
    purge_gone_s: float | None  # until the counts showed none (None: not within the wait)
    purge_removed_s: float | None  # until the store held none of them (None: not in the wait)
    delete_floor_rate: float  # messages a second the store deleted, straight and alone

    def rows(self) -> list[tuple[str, str, str, bool | None]]:
        """(figure, value, target, passed) per figure."""
        receive = self.receive_p50_ms / self.receive_shallow_p50_ms
        attributes = self.attributes_p50_ms / self.attributes_empty_p50_ms
        return [
            (f"SIGTERM to exit, {self.messages:,} stored",
             "killed" if self.stop_s is None else f"{self.stop_s:.2f} s",
             f"<= {STOP_TARGET_S:g} s", self.stop_s is not None and self.stop_s <= STOP_TARGET_S),
            (f"restart to first answer, {self.messages:,} stored", f"{self.restart_s:.2f} s",
             f"<= {RESTART_TARGET_S:g} s", self.restart_s <= RESTART_TARGET_S),
            ("start to first answer, empty data folder", f"{self.empty_start_s:.2f} s", "-",
             None),
            (f"ReceiveMessage p50, deep / shallow ({SHALLOW:,}; both claim ten)",
             f"{self.receive_p50_ms:.1f} / {self.receive_shallow_p50_ms:.1f} ms = "
             f"{receive:.2f}x", f"<= {P50_RATIO:g}x", receive <= P50_RATIO),
            ("ReceiveMessage p50, deep / empty (claims nothing)",
             f"{self.receive_p50_ms:.1f} / {self.receive_empty_p50_ms:.1f} ms = "
             f"{self.receive_p50_ms / self.receive_empty_p50_ms:.2f}x", "-", None),
            ("GetQueueAttributes p50, deep / empty",
             f"{self.attributes_p50_ms:.1f} / {self.attributes_empty_p50_ms:.1f} ms = "
             f"{attributes:.2f}x", f"<= {P50_RATIO:g}x", attributes <= P50_RATIO),
            ("messages kept (visible + in flight after the restart)",
             f"{self.stored_after:,}", f"= {self.messages:,}", self.stored_after == self.messages),
            ("PurgeQueue of the deep queue: its answer", f"{self.purge_answer_s:.2f} s",
             f"<= {PURGE_ANSWER_S:g} s", self.purge_answer_s <= PURGE_ANSWER_S),
            ("a receive right after the purge", f"{self.received_after_purge} messages", "= 0",
             self.received_after_purge == 0),
            ("purge to counts showing no message",
             "not within the wait" if self.purge_gone_s is None else f"{self.purge_gone_s:.1f} s",
             f"<= {PURGE_GONE_S:g} s",
             self.purge_gone_s is not None and self.purge_gone_s <= PURGE_GONE_S),
            ("purge to the store holding none of its messages",
             "not within the wait" if self.purge_removed_s is None
             else f"{self.purge_removed_s:.1f} s", f"<= {PURGE_GONE_S:g} s",
             self.purge_removed_s is not None and self.purge_removed_s <= PURGE_GONE_S),
            (f"the store's delete floor ({FLOOR_MESSAGES:,} messages straight in the store, "
             "8 writers), and the deep queue's messages at that rate",
             f"{self.delete_floor_rate:,.0f} a second; "
             f"{self.messages / self.delete_floor_rate:,.0f} s", "-", None),
        ]


def table(result: DeepResult) -> str:
    """The figures as a Markdown table, each target PASS or FAIL."""
    lines = [f"fill: {result.fill_s:.0f} s ({result.fill_rate:,.0f} messages/s), settle "
             f"{result.settle_s:.0f} s", "",
             "| figure | measured | target | result |", "|---|---:|---|---|"]
    for figure, value, target, passed in result.rows():
        verdict = "-" if passed is None else "PASS" if passed else "FAIL"
        lines.append(f"| {figure} | {value} | {target} | {verdict} |")
    return "\n".join(lines)


def _stored(sqs: Any, url: str) -> int:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(found["ApproximateNumberOfMessages"]) + \
        int(found["ApproximateNumberOfMessagesNotVisible"])


def _wait_counted(sqs: Any, url: str, wanted: int, timeout_s: float) -> int:
    """Wait until the queue's count shows `wanted` (the pump has counted the fill)."""
    deadline = time.monotonic() + timeout_s
    seen = _stored(sqs, url)
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(1.0)
        seen = _stored(sqs, url)
    return seen


def _p50_ms(samples: list[float]) -> float:
    return round(percentile(samples, 50) * 1000, 2)


def _interleaved(calls: int, named: dict[str, Callable[[], Any]]) -> dict[str, list[float]]:
    """Each call `calls` times, in turns, so that the machine's load falls on all alike."""
    taken: dict[str, list[float]] = {name: [] for name in named}
    for _ in range(calls):
        for name, call in named.items():
            started = time.perf_counter()
            call()
            taken[name].append(time.perf_counter() - started)
    return taken


def _start(data_dir: Path, port: int | None = None) -> tuple[Server, float]:
    server = start_dmq(data_dir, port, {"DMQ_COUNT_DYNAMODB": ""})
    try:
        return server, round(server.wait_answering(), 2)
    except BaseException:
        server.stop()
        raise


def _floor() -> float:
    """Seconds from spawn to first answer on an empty data folder."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-deep-empty-"))
    try:
        server, seconds = _start(data_dir)
        sigterm(server)
        return seconds
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _load(server: Server, data_dir: Path, messages: int, calls: int,
          ) -> tuple[dict[str, str], float, float, float]:
    """The queues' URLs, the fill's seconds and rate, and the settle's seconds."""
    sqs = sqs_client(server.url)
    urls = {name: sqs.create_queue(QueueName=f"dmq-bench-{name}")["QueueUrl"]
            for name in ("deep", "shallow", "empty")}
    dynamodb = store_client(store_endpoint(server.process.pid), data_dir)

    def progress(done: int) -> None:
        if done % 100_000 < 25:
            print(f"  {done:,} of {messages:,} messages written", flush=True)

    filled = fill(dynamodb, _queue_id(urls["deep"]), messages, body_bytes=BODY_BYTES,
                  progress=progress)
    fill(dynamodb, _queue_id(urls["shallow"]), SHALLOW + RECEIVED * calls,
         body_bytes=BODY_BYTES)
    settle_s = wait_idle(server.process.pid, timeout_s=SETTLE_TIMEOUT_S)
    counted = _wait_counted(sqs, urls["deep"], messages, COUNT_TIMEOUT_S)
    if counted != messages:
        raise RuntimeError(f"the deep queue counts {counted:,} of {messages:,} messages")
    return urls, round(filled.seconds, 1), round(filled.rate), settle_s


def _measure(sqs: Any, urls: dict[str, str], calls: int) -> tuple[dict[str, list[float]], int]:
    returned = 0

    def receive(name: str) -> Callable[[], Any]:
        def call() -> None:
            nonlocal returned
            got = sqs.receive_message(QueueUrl=urls[name], MaxNumberOfMessages=RECEIVED,
                                      VisibilityTimeout=VISIBILITY_S, WaitTimeSeconds=0)
            if name == "deep":
                returned += len(got.get("Messages", []))
        return call

    def attributes(name: str) -> Callable[[], Any]:
        return lambda: sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["All"])

    taken = _interleaved(calls, {
        "receive deep": receive("deep"), "receive empty": receive("empty"),
        "receive shallow": receive("shallow")})
    # The receives' claims reach the counts through the stream: a count read waits for
    # the pump to hand them over, so the attributes are read once all are counted.
    _wait_counted(sqs, urls["deep"], _stored(sqs, urls["deep"]), COUNT_TIMEOUT_S)
    taken |= _interleaved(calls, {"attributes deep": attributes("deep"),
                                  "attributes empty": attributes("empty")})
    return taken, returned


def _held(dynamodb: Any, url: str) -> bool:
    """Whether the store still holds a message of the queue's shard 0 (where `fill` puts
    them): one Query of at most one key, which costs the same however many remain."""
    found = dynamodb.query(
        TableName=Settings().messages_table, Limit=1, ProjectionExpression="pk",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition_key(_queue_id(url), 0)}})
    return bool(found.get("Items"))


def _delete_floor(sqs: Any, dynamodb: Any, server: Server) -> float:
    """Messages a second the store deletes, straight and with nothing else asking it: a
    queue of `FLOOR_MESSAGES` filled, counted in, then emptied (`bench.stop_time.empty`)."""
    url = sqs.create_queue(QueueName="dmq-bench-floor")["QueueUrl"]
    fill(dynamodb, _queue_id(url), FLOOR_MESSAGES, body_bytes=BODY_BYTES)
    wait_idle(server.process.pid, timeout_s=SETTLE_TIMEOUT_S)
    emptied = empty(dynamodb, _queue_id(url))
    wait_idle(server.process.pid, timeout_s=SETTLE_TIMEOUT_S)
    if emptied.messages != FLOOR_MESSAGES:
        raise RuntimeError(f"the floor deleted {emptied.messages:,} of {FLOOR_MESSAGES:,}")
    return round(emptied.rate)


def _queue_id(url: str) -> str:
    return "/".join(url.rsplit("/", 2)[-2:])


def _purge(sqs: Any, dynamodb: Any, url: str, wait_s: float,
           ) -> tuple[float, int, float | None, float | None]:
    """PurgeQueue: its answer's seconds, what a receive right after returns, and the
    seconds until the counts show no message and until the store holds none (None: not
    within `wait_s`)."""
    started = time.perf_counter()
    sqs.purge_queue(QueueUrl=url)
    answered = time.perf_counter() - started
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=RECEIVED, WaitTimeSeconds=0)
    deadline = time.monotonic() + wait_s
    gone: float | None = None
    removed: float | None = None
    while (gone is None or removed is None) and time.monotonic() < deadline:
        if gone is None and _stored(sqs, url) == 0:
            gone = round(time.perf_counter() - started, 1)
        if removed is None and not _held(dynamodb, url):
            removed = round(time.perf_counter() - started, 1)
        time.sleep(0.5 if gone is None else 2.0)
    return round(answered, 2), len(got.get("Messages", [])), gone, removed


def run(messages: int, calls: int, purge_wait_s: float | None = None) -> DeepResult:
    """Fill, stop, restart and measure one server of `messages` messages in one queue;
    wait `purge_wait_s` at most for the purge's removal (by default long enough for
    the store's removal rate, at least five times SQS's minute)."""
    empty_start_s = _floor()
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-deep-"))
    try:
        server, _ = _start(data_dir)
        try:
            urls, fill_s, rate, settle_s = _load(server, data_dir, messages, calls)
            print(f"  {messages:,} messages counted; stopping", flush=True)
            stop_s, _ = sigterm(server)
        finally:
            server.stop()
        again, restart_s = _start(data_dir, server.port)
        try:
            sqs = sqs_client(again.url)
            taken, returned = _measure(sqs, urls, calls)
            stored = _stored(sqs, urls["deep"])
            print(f"  before the purge: stop {stop_s} s, restart {restart_s} s; p50 ms: "
                  + ", ".join(f"{name} {_p50_ms(samples)}" for name, samples in taken.items())
                  + f"; {stored:,} kept; purging", flush=True)
            dynamodb = store_client(store_endpoint(again.process.pid), data_dir)
            floor_rate = _delete_floor(sqs, dynamodb, again)
            print(f"  the store's delete floor: {floor_rate:,.0f} a second", flush=True)
            wait_s = (max(PURGE_GONE_S * 5, messages / 500) if purge_wait_s is None
                      else purge_wait_s)
            purged = _purge(sqs, dynamodb, urls["deep"], wait_s)
            sigterm(again)
        finally:
            again.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return DeepResult(
        messages=messages, fill_s=fill_s, fill_rate=rate, settle_s=settle_s, stop_s=stop_s,
        restart_s=restart_s, empty_start_s=empty_start_s,
        receive_p50_ms=_p50_ms(taken["receive deep"]),
        receive_empty_p50_ms=_p50_ms(taken["receive empty"]),
        receive_shallow_p50_ms=_p50_ms(taken["receive shallow"]),
        attributes_p50_ms=_p50_ms(taken["attributes deep"]),
        attributes_empty_p50_ms=_p50_ms(taken["attributes empty"]),
        stored_after=stored, returned=returned, purge_answer_s=purged[0],
        received_after_purge=purged[1], purge_gone_s=purged[2], purge_removed_s=purged[3],
        delete_floor_rate=floor_rate)


def main(argv: Sequence[str] | None = None) -> DeepResult:
    """Measure and print the table (and JSON, when asked)."""
    parser = argparse.ArgumentParser(prog="python -m bench.deep_queue", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=MESSAGES,
                        help=f"messages stored in the deep queue (default {MESSAGES:,})")
    parser.add_argument("--calls", type=int, default=CALLS,
                        help=f"timed calls of each kind after the restart (default {CALLS})")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--purge-wait", type=float, default=None,
                        help="seconds to wait at most for the purge's removal (default: "
                             "at least 300, a second per 500 messages)")
    args = parser.parse_args(argv)
    print(f"a queue of {args.messages:,} messages ...", flush=True)
    result = run(args.messages, args.calls, args.purge_wait)
    print("\n" + table(result) + "\n", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(result), indent=2))
    return result


if __name__ == "__main__":
    main()
