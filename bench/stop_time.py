"""How long one SIGTERM takes to stop DMQ, against the messages it holds.

For each size: a DMQ server (`python -m dmqlocal`, its default store) on a fresh data
folder and a free loopback port; one queue filled straight into DynamoDB Local in DMQ's
item format (below), a few messages then received over HTTP so that they are in flight;
a wait until the server is idle (its stream pump has handed every change to the archive
and the exports); one SIGTERM, timed until the process exits; then a restart on the
same folder, which must hold every message, the in-flight ones still in flight. The
stop used to write a full table export, a scan of every table: 15.8 s at 50,000
messages and a minute at 100,000. It now writes only the incremental export of the
last changes.

The store is filled with BatchWriteItem straight into DynamoDB Local's messages table,
in the item format DMQ's own store writes (`chalicelib.backend.items.to_item`); the
server's stream pump counts them in, as it would count sends. Sending through
SendMessageBatch costs the HTTP front end and a conditional write per batch; writing the
items directly skips both (1,200 against 600 messages/s on two cores, while the stream
pump keeps up). The pump still sees every write, as it would see the sends.

    python -m bench.stop_time [--sizes 10000,50000,500000] [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from bench.servers import STOP_TIMEOUT_S, Server, start_dmq, wait_idle
from bench.sqs import sqs_client
from chalicelib.backend import items
from chalicelib.domain.messages import Message, new_message_id
from chalicelib.service.checksums import md5_of_body
from chalicelib.settings import Settings
from dmqlocal.store_key import KEY_FILE

FULL_SIZES = "10000,50000,500000"
QUICK_SIZES = "2000"
IN_FLIGHT = 10
SETTLE_TIMEOUT_S = 900.0
STOP_TARGET_S = 5.0
BATCH = 25  # BatchWriteItem's most
RETENTION_S = 4 * 86_400  # SQS's default retention
RETRIES = 8


@dataclass(frozen=True)
class StoreWrites:
    """How many messages were written (or deleted) straight in the store, and how long it
    took."""

    messages: int
    seconds: float

    @property
    def rate(self) -> float:
        """Messages written (or deleted) per second."""
        return self.messages / self.seconds if self.seconds else 0.0


def store_endpoint(server_pid: int) -> str:
    """The endpoint of the DynamoDB Local child of a `python -m dmqlocal` process: the
    `-port` on the command line of its java child (Linux /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != server_pid or b"-port" not in argv:
            continue
        return f"http://127.0.0.1:{argv[argv.index(b'-port') + 1].decode()}"
    raise RuntimeError(f"no DynamoDB Local child of process {server_pid}")


def store_client(endpoint: str, data_dir: Path, region: str = "us-east-1",
                 threads: int = 8) -> Any:
    """A DynamoDB client signing as DMQ does (with the data folder's own key id: DynamoDB
    Local keeps one database per key id and region), so it reaches DMQ's tables."""
    key = (data_dir / KEY_FILE).read_text().strip()
    return boto3.client(
        "dynamodb", endpoint_url=endpoint, region_name=region, aws_access_key_id=key,
        aws_secret_access_key=key,
        config=Config(max_pool_connections=threads * 2, retries={"mode": "standard",
                                                                 "max_attempts": 10}))


def message_items(queue_id: str, count: int, body: str, now_ms: int) -> list[dict[str, Any]]:
    """`count` visible messages of a one-shard standard queue, as DMQ's store writes them."""
    made = []
    for _ in range(count):
        message = Message(message_id=new_message_id(now_ms), body=body,
                          body_md5=md5_of_body(body), sent_ms=now_ms, visible_at=now_ms,
                          expires_ms=now_ms + RETENTION_S * 1000,
                          sender_id=queue_id.split("/", 1)[0])
        made.append(items.to_item(queue_id, 0, message))
    return made


def _write(dynamodb: Any, table: str, batch: list[dict[str, Any]]) -> None:
    _batch_write(dynamodb, {table: [{"PutRequest": {"Item": i}} for i in batch]})


def _delete(dynamodb: Any, table: str, keys: list[dict[str, Any]]) -> int:
    _batch_write(dynamodb, {table: [{"DeleteRequest": {"Key": k}} for k in keys]})
    return len(keys)


def _batch_write(dynamodb: Any, requests: dict[str, Any]) -> None:
    """One BatchWriteItem, its unprocessed requests sent again (a bounded number of times,
    backing off)."""
    for attempt in range(RETRIES):
        left = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems")
        if not left:
            return
        requests = left
        time.sleep(0.05 * 2 ** attempt)
    raise RuntimeError("BatchWriteItem left requests unprocessed")


def fill(dynamodb: Any, queue_id: str, count: int, *, body_bytes: int = 256,
         threads: int = 8, progress: Callable[[int], None] | None = None) -> StoreWrites:
    """Write `count` messages into the queue's shard 0 (the server's stream pump counts
    them in)."""
    settings = Settings()
    table = settings.messages_table
    body = "x" * body_bytes
    started = time.perf_counter()
    written = 0

    def write(n: int) -> int:
        _write(dynamodb, table, message_items(queue_id, n, body, int(time.time() * 1000)))
        return n

    sizes = [min(BATCH, count - i) for i in range(0, count, BATCH)]
    with ThreadPoolExecutor(threads) as pool:
        for n in pool.map(write, sizes):
            written += n
            if progress is not None and written % 10_000 < BATCH:
                progress(written)
    return StoreWrites(written, time.perf_counter() - started)


def empty(dynamodb: Any, queue_id: str, *, threads: int = 8) -> StoreWrites:
    """Delete every message of the queue's shard 0 straight in the store, as fast as it
    takes them: its keys read a page of 1,000 at a time, each page's deletes sent 25 to a
    BatchWriteItem from `threads` writers. The floor of a purge's removal: the same deletes
    on the same table, the least reading that finds their keys (the table's own keys, not
    the index a purge reads for each message's weight), and nothing else asking the store."""
    table = Settings().messages_table
    values = {":pk": {"S": items.partition_key(queue_id, 0)}}
    started = time.perf_counter()
    deleted = 0
    start: dict[str, Any] | None = None
    with ThreadPoolExecutor(threads) as pool:
        while True:
            request: dict[str, Any] = {
                "TableName": table, "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": values, "ProjectionExpression": "pk, sk",
                "Limit": 1000}
            if start:
                request["ExclusiveStartKey"] = start
            page = dynamodb.query(**request)
            keys = [{"pk": i["pk"], "sk": i["sk"]} for i in page.get("Items", [])]
            batches = [keys[i:i + BATCH] for i in range(0, len(keys), BATCH)]
            deleted += sum(pool.map(lambda b: _delete(dynamodb, table, b), batches))
            start = page.get("LastEvaluatedKey")
            if not start:
                return StoreWrites(deleted, time.perf_counter() - started)


@dataclass(frozen=True)
class StopResult:
    """One size's figures."""

    messages: int
    fill_s: float
    fill_rate: float
    settle_s: float
    stop_s: float | None  # None: it did not exit, and was killed
    exit_code: int | None
    restart_s: float
    visible: int
    in_flight: int
    sample_ok: bool

    @property
    def kept_all(self) -> bool:
        """Whether the restart had every message, the in-flight ones in flight."""
        return (self.visible, self.in_flight) == (self.messages - IN_FLIGHT, IN_FLIGHT) \
            and self.sample_ok


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return (int(found["ApproximateNumberOfMessages"]),
            int(found["ApproximateNumberOfMessagesNotVisible"]))


def _receive(sqs: Any, url: str, wanted: int) -> list[dict[str, Any]]:
    """Up to `wanted` messages, received for an hour (a few calls at most)."""
    received: list[dict[str, Any]] = []
    for _ in range(20):
        if len(received) >= wanted:
            break
        received += sqs.receive_message(QueueUrl=url, VisibilityTimeout=3600,
                                        MaxNumberOfMessages=min(10, wanted - len(received)),
                                        ).get("Messages", [])
    return received


def sigterm(server: Server, timeout_s: float = STOP_TIMEOUT_S) -> tuple[float | None, int | None]:
    """One SIGTERM; (seconds until the process exited, its exit code), or (None, None)
    when it did not exit in time (it is then killed)."""
    started = time.perf_counter()
    server.process.send_signal(signal.SIGTERM)
    try:
        code = server.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        server.stop(1)
        return None, None
    elapsed = time.perf_counter() - started
    server.stop(5)  # reaps whatever it left behind
    return round(elapsed, 2), code


def _fill(server: Server, data_dir: Path, messages: int) -> tuple[str, float, float, set[str]]:
    """The queue's URL, fill seconds and rate, and the ids of the messages in flight."""
    sqs = sqs_client(server.url)
    url = sqs.create_queue(QueueName="dmq-bench-stop")["QueueUrl"]
    queue_id = "/".join(url.rsplit("/", 2)[-2:])

    def progress(done: int) -> None:
        if done % 100_000 < 25:
            print(f"  {done:,} of {messages:,} messages written", flush=True)

    dynamodb = store_client(store_endpoint(server.process.pid), data_dir)
    filled = fill(dynamodb, queue_id, messages, progress=progress)
    held = {m["MessageId"] for m in _receive(sqs, url, IN_FLIGHT)}
    return url, round(filled.seconds, 1), round(filled.rate), held


def measure_size(messages: int) -> StopResult:
    """Fill, settle, stop and restart one server of `messages` messages."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-stop-"))
    try:
        server = start_dmq(data_dir)
        try:
            server.wait_answering()
            url, fill_s, rate, held = _fill(server, data_dir, messages)
            settle_s = wait_idle(server.process.pid, timeout_s=SETTLE_TIMEOUT_S)
            stop_s, code = sigterm(server)
        finally:
            server.stop()
        again = start_dmq(data_dir, server.port)
        try:
            restart_s = round(again.wait_answering(), 2)
            sqs = sqs_client(again.url)
            visible, in_flight = _counts(sqs, url)
            sample = {m["MessageId"] for m in _receive(sqs, url, IN_FLIGHT)}
            sigterm(again)
        finally:
            again.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return StopResult(messages, fill_s, rate, settle_s, stop_s, code, restart_s, visible,
                      in_flight, len(sample) == IN_FLIGHT and not sample & held)


def table(results: Sequence[StopResult]) -> str:
    """The figures as a Markdown table."""
    lines = ["| messages stored | fill (s) | fill rate (msg/s) | settle (s) | SIGTERM to exit (s) "
             "| exit code | restart (s) | after restart: visible / in flight | sample receive |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        stop = "killed" if r.stop_s is None else f"{r.stop_s:.2f}"
        mark = "" if r.stop_s is not None and r.stop_s < STOP_TARGET_S else " (over 5 s)"
        kept = f"{r.visible:,} / {r.in_flight:,}" + ("" if r.kept_all else " (MISSING)")
        lines.append(f"| {r.messages:,} | {r.fill_s} | {r.fill_rate:,.0f} | {r.settle_s} | "
                     f"{stop}{mark} | {r.exit_code} | {r.restart_s} | {kept} | "
                     f"{'ok' if r.sample_ok else 'FAILED'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[StopResult]:
    """Measure each size and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.stop_time", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=None,
                        help=f"messages stored, comma-separated (default {FULL_SIZES})")
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in (args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))
             .split(",") if n.strip()]
    results = []
    for size in sizes:
        print(f"stop time with {size:,} messages stored ...", flush=True)
        results.append(measure_size(size))
        print(table(results[-1:]).splitlines()[-1], flush=True)
    print("\n" + table(results) + "\n", flush=True)
    return results


if __name__ == "__main__":
    main()
