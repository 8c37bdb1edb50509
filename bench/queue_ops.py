"""Queue operations when one account holds many queues, against the same on one queue.

    python -m bench.queue_ops --queues 10000

Starts DynamoDB Local and DMQ (`bench/idle_cost.IdleServer`), makes one queue through
SQS and copies its record `--queues` times straight into the queues table of the default
account (as an account that has grown to that size holds them), then restarts DMQ on the
store itself (no counting proxy in between) and times, each after a warm-up:

- ListQueues with MaxResults=1000 (a full page): p50 (target <= 100 ms);
- GetQueueAttributes(All) of one queue: p50, against a server holding that one queue
  alone (target: within 1.2x);
- CreateQueue of new queues by 8 clients at once: queues a second (target >= 200).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3

from bench.idle_cost import IdleServer
from bench.sqs import sqs_client
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY

ACCOUNT = "000000000000"  # the account unsigned-for requests act as
LIST_TARGET_MS = 100.0
ATTRIBUTES_RATIO = 1.2
CREATE_TARGET_PER_S = 200.0
CLIENTS = 8


@dataclass(frozen=True)
class QueueOps:
    """The figures of one server."""

    queues: int
    list_p50_ms: float | None  # None with too few queues for a full page
    attributes_p50_ms: float
    create_per_s: float


def load_queues(server: IdleServer, count: int, prefix: str = "ops") -> None:
    """Copy a queue made through SQS `count - 1` times into the queues table."""
    assert server.dmq is not None
    sqs_client(server.dmq.url).create_queue(QueueName=f"{prefix}-000000")
    if count <= 1:
        return
    db = boto3.client("dynamodb", endpoint_url=server.store.endpoint, region_name="us-east-1",
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    template = next(i for i in db.scan(TableName="dmq-queues")["Items"]
                    if i["name"]["S"] == f"{prefix}-000000")
    batch: list[dict[str, Any]] = []
    for n in range(1, count):
        name = f"{prefix}-{n:06d}"
        batch.append({"PutRequest": {"Item": {
            **template, "queue_id": {"S": f"{ACCOUNT}/{name}"}, "name": {"S": name}}}})
        if len(batch) == 25 or n == count - 1:
            pending: dict[str, Any] = {"dmq-queues": batch}
            while pending:
                pending = db.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
            batch = []


def _p50_ms(call: Callable[[], Any], times: int) -> float:
    call()  # warm
    taken = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        taken.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(taken), 1)


def _create_rate(endpoint: str, count: int) -> float:
    sqs = sqs_client(endpoint, CLIENTS, attempts=5)
    start = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda n: sqs.create_queue(QueueName=f"new-{n:06d}"), range(count)))
    return round(count / (time.perf_counter() - start), 1)


def measure(queues: int, creates: int = 1000) -> QueueOps:
    """One server holding `queues` queues in one account."""
    server = IdleServer()
    try:
        server.start()
        assert server.dmq is not None
        load_queues(server, queues)
        server.start_dmq(counted=False)  # timed on the store itself, not through the proxy
        assert server.dmq is not None
        sqs = sqs_client(server.dmq.url)
        url = f"{server.dmq.url}/{ACCOUNT}/ops-000000"
        listing = None
        if queues >= 1000:
            listing = _p50_ms(lambda: sqs.list_queues(MaxResults=1000), 20)
        attributes = _p50_ms(
            lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]), 200)
        return QueueOps(queues, listing, attributes, _create_rate(server.dmq.url, creates))
    finally:
        server.stop()


def report(many: QueueOps, one: QueueOps) -> str:
    """The figures against their targets, beside the one-queue server's."""
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    listing = "-" if many.list_p50_ms is None else f"{many.list_p50_ms:.1f} ms"
    ratio = many.attributes_p50_ms / one.attributes_p50_ms if one.attributes_p50_ms else 0.0
    return "\n".join([
        f"| queue operations | {many.queues:,} queues | 1 queue | target | |",
        "|---|---|---|---|---|",
        f"| ListQueues, 1,000 results, p50 | {listing} | - | <= {LIST_TARGET_MS:g} ms | "
        f"{verdict(many.list_p50_ms is not None and many.list_p50_ms <= LIST_TARGET_MS)} |",
        f"| GetQueueAttributes p50 | {many.attributes_p50_ms:.1f} ms ({ratio:.2f}x) | "
        f"{one.attributes_p50_ms:.1f} ms | <= {ATTRIBUTES_RATIO:g}x | "
        f"{verdict(ratio <= ATTRIBUTES_RATIO)} |",
        f"| CreateQueue, {CLIENTS} clients | {many.create_per_s:.1f}/s | "
        f"{one.create_per_s:.1f}/s | >= {CREATE_TARGET_PER_S:g}/s | "
        f"{verdict(many.create_per_s >= CREATE_TARGET_PER_S)} |",
    ])


def main(argv: Sequence[str] | None = None) -> tuple[QueueOps, QueueOps]:
    """Measure both servers and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.queue_ops", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--creates", type=int, default=1000)
    args = parser.parse_args(argv)
    print(f"queue operations: {args.queues:,} queues in one account, then one ...", flush=True)
    many = measure(args.queues, args.creates)
    one = measure(1, args.creates)
    print("\n" + report(many, one) + "\n", flush=True)
    return many, one


if __name__ == "__main__":
    main()
