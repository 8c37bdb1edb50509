"""What 10,000 idle queues cost a local server, at rest and when looked at.

    python -m bench.many_queues --queues 10000

Starts DynamoDB Local, a counting proxy in front of it and DMQ's local server on the proxy
(`bench/idle_cost.py`'s `IdleServer`). One queue is created through SQS; its record is
then copied `--queues` times straight into the queues table (BatchWriteItem, past the
proxy, spread over ten accounts), as a deployment that has grown to that size holds them.
A few of them get messages through SQS. Once the server is quiet it measures:

- idle store requests per second over a window that spans every minute timer (target
  <= 2), by operation;
- the CPU share of the DMQ process over that window (target <= 2% of one core), and of
  DynamoDB Local;
- `GET /metrics`: the wall time of a cold scrape and of the next ones (target <= 1 s),
  and the age of the figures they answer with (target <= 15 s);
- `GET /console` (the queue list): the wall time of its first page (target <= 1 s).
"""

from __future__ import annotations

import argparse
import base64
import os
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import boto3

from bench.idle_cost import IdleServer
from bench.sqs import sqs_client
from chalicelib.metadata import queue_counts
from dmqlocal.dynamodb_local import ACCESS_KEY, SECRET_KEY

ACCOUNTS = 10
BUSY_QUEUES = 20  # queues given messages through SQS
TARGET_REQUESTS_PER_S = 2.0
TARGET_CPU = 0.02
TARGET_SCRAPE_S = 1.0
TARGET_AGE_S = 15.0
TARGET_LIST_S = 1.0
TIMEOUT_S = 300.0  # a view that has not answered by then is reported as such


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _store_pid(server: IdleServer) -> int | None:
    return server.store.pid


def _account(n: int) -> str:
    """The account of the n-th queue: the default one (whose root the bench signs as)
    for every tenth queue, nine others for the rest."""
    return "000000000000" if n % ACCOUNTS == 0 else f"{100000000000 + n % ACCOUNTS}"


def load_queues(server: IdleServer, count: int) -> float:
    """Copy a queue made through SQS `count` times into the queues table; the seconds."""
    assert server.dmq is not None
    sqs_client(server.dmq.url).create_queue(QueueName="many-template")
    return copy_queues(server.store.endpoint, "000000000000/many-template", count,
                       lambda n: (_account(n), f"many-{n:06d}"))


def copy_queues(store: str, template_id: str, count: int,
                named: Callable[[int], tuple[str, str]]) -> float:
    """Copy the record of queue `template_id` `count` times straight into the queues table
    of the store at `store` (`named(n)`: the n-th copy's account and name), as a
    deployment that has grown to that size holds them; the seconds it took."""
    db = boto3.client("dynamodb", endpoint_url=store, region_name="us-east-1",
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    template = db.get_item(TableName="dmq-queues", Key={"queue_id": {"S": template_id}},
                           ConsistentRead=True)["Item"]
    start = time.perf_counter()
    batch: list[dict[str, Any]] = []
    for n in range(count):
        account, name = named(n)
        item = {**template, "queue_id": {"S": f"{account}/{name}"},
                "account": {"S": account}, "name": {"S": name}}
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25 or n == count - 1:
            pending: dict[str, Any] = {"dmq-queues": batch}
            while pending:
                pending = db.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})
            batch = []
    # As CreateQueue does: each account's queue counter counts its copies, and the
    # catalogue's version moves (a version without either ignores them).
    added = Counter(named(n)[0] for n in range(count))
    for account, copies in added.items():
        db.update_item(TableName="dmq-control", Key={"key": {"S": queue_counts.key_of(account)}},
                       UpdateExpression="ADD n :added",
                       ExpressionAttributeValues={":added": {"N": str(copies)}})
    db.update_item(TableName="dmq-control", Key={"key": {"S": "catalogue"}},
                   UpdateExpression="ADD n :one", ExpressionAttributeValues={":one": {"N": "1"}})
    return time.perf_counter() - start


def give_messages(server: IdleServer, queues: int, messages: int = 5) -> None:
    """Send to the first `queues` queues of the first account (their URLs by name)."""
    assert server.dmq is not None
    sqs = sqs_client(server.dmq.url)
    for n in range(0, queues * ACCOUNTS, ACCOUNTS):
        url = f"{server.dmq.url}/{_account(n)}/many-{n:06d}"
        for i in range(messages):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")


def _get(url: str, auth: str | None = None, timeout: float = 600) -> tuple[float, bytes]:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return time.perf_counter() - start, body


class _Lines(list[str]):
    """The report's lines, each printed as it comes (a run can take many minutes)."""

    def append(self, line: str) -> None:
        print(line, flush=True)
        super().append(line)


def measure(queues: int, window_s: float, settle_s: float) -> list[str]:
    """Run it; the report's lines."""
    server = IdleServer()
    lines = _Lines()
    try:
        server.start()
        assert server.dmq is not None and server.proxy is not None
        took = load_queues(server, queues)
        lines.append(f"loaded {queues} queues in {took:.1f} s")
        give_messages(server, min(BUSY_QUEUES, -(-queues // ACCOUNTS)))
        time.sleep(settle_s)
        dmq_pid, store_pid = server.dmq.process.pid, _store_pid(server)
        cpu0 = _cpu_s(dmq_pid)
        store0 = _cpu_s(store_pid) if store_pid else 0.0
        start = time.monotonic()
        time.sleep(window_s)
        end = time.monotonic()
        cpu = _cpu_s(dmq_pid) - cpu0
        store_cpu = (_cpu_s(store_pid) - store0) if store_pid else float("nan")
        counts = server.proxy.by_operation(start, end)
        per_s = sum(counts.values()) / (end - start)
        lines.append(f"idle store requests: {per_s:.2f}/s over {end - start:.0f} s "
                     f"(target <= {TARGET_REQUESTS_PER_S:g}): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        tables: Counter[str] = Counter()
        for call in server.proxy.calls(start, end):
            tables[f"{call.operation} {','.join(call.tables) or 'streams'}"] += 1
        lines.append("  by table: " + ", ".join(f"{k} {v}" for k, v in sorted(tables.items())))
        lines.append(f"idle CPU: DMQ {100 * cpu / (end - start):.2f}% of a core "
                     f"(target <= {100 * TARGET_CPU:g}%), DynamoDB Local "
                     f"{100 * store_cpu / (end - start):.2f}%")
        for label in ("cold", "next", "next"):
            before = time.monotonic()
            try:
                wall, body = _get(server.dmq.url + "/metrics", timeout=TIMEOUT_S)
            except TimeoutError:
                lines.append(f"/metrics {label}: no answer within {TIMEOUT_S:g} s")
                continue
            series = body.count(b"dmq_messages_visible{")
            lines.append(f"/metrics {label}: {wall:.2f} s, {series} queues, "
                         f"{server.proxy.by_operation(before, time.monotonic())}")
            time.sleep(2.0)
        for label in ("first", "again"):
            before = time.monotonic()
            try:
                wall, body = _get(server.dmq.url + "/console", auth="admin:x",
                                  timeout=TIMEOUT_S)
            except TimeoutError:
                lines.append(f"/console {label}: no answer within {TIMEOUT_S:g} s")
                continue
            rows = body.count(b"/console/queues/")
            lines.append(f"/console {label}: {wall:.2f} s, {rows} queue links, "
                         f"{len(body)} bytes, "
                         f"{sum(server.proxy.by_operation(before, time.monotonic()).values())}"
                         " store requests")
    finally:
        server.stop()
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(prog="python -m bench.many_queues", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=150.0,
                        help="seconds counted idle (spans the minute timers)")
    parser.add_argument("--settle", type=float, default=75.0,
                        help="seconds after loading before the window: the minute timers "
                             "have made their first pass")
    args = parser.parse_args(argv)
    measure(args.queues, args.window, args.settle)


if __name__ == "__main__":
    main()
