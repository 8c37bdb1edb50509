"""Many consumers long-polling at once: what a healthy store answers them.

One `python -m dmqlocal` on its default store (DynamoDB Local), on a free loopback port.
`--waits` consumers (300 by default), each a thread with a queue of its own, call
ReceiveMessage with WaitTimeSeconds=20 at once, through one boto3 client whose pool holds
a connection for each (no retries, so every 5xx shows; a client per thread would cost the
bench some 4 MB each); `--send-after` seconds later (5) one message is sent to each queue.
Counted: the answers by status (a consumer that got its message, an empty answer, a
5xx), the server's "Connection pool is full" warnings and its ClusterUnavailable lines,
and the server's RSS (the Python process alone, and with DynamoDB Local) while every
consumer waits.

    python -m bench.long_polls                 # 300 waits
    python -m bench.long_polls --waits 1200    # at the scale of issue #31
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import _rss_kib, start_dmq, tree_rss_mib

POOL_WARNING = "Connection pool is full"


def client(url: str, pool: int) -> Any:
    """A boto3 SQS client with no retries and a read timeout past the longest wait."""
    return boto3.session.Session().client(
        "sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1},
                      max_pool_connections=pool, connect_timeout=10, read_timeout=60))


def run(waits: int, send_after_s: float, extra_env: dict[str, str]) -> dict[str, Any]:
    """Start a server, run the waits, stop it; the counts."""
    data = Path(tempfile.mkdtemp(prefix="dmq-long-polls-"))
    server = start_dmq(data, extra_env={"DMQ_COUNT_DYNAMODB": "0", **extra_env})
    lines: list[str] = []
    # bench.servers keeps only a tail; read every line here instead.
    assert server.process.stdout is not None
    stdout = server.process.stdout

    def read() -> None:
        for line in stdout:
            lines.append(line)

    threading.Thread(target=read, name="bench-long-polls-output", daemon=True).start()
    try:
        server.wait_answering()
        admin = client(server.url, waits + 20)
        with ThreadPoolExecutor(8) as pool:
            urls = list(pool.map(
                lambda i: admin.create_queue(QueueName=f"lp-{i}")["QueueUrl"], range(waits)))
        answers: Counter[str] = Counter()
        failures: list[tuple[float, str]] = []
        lock = threading.Lock()
        started = threading.Barrier(waits + 1)

        def consume(i: int) -> None:
            started.wait()
            begun = time.monotonic()
            try:
                got = admin.receive_message(QueueUrl=urls[i], WaitTimeSeconds=20)
                outcome = "message" if got.get("Messages") else "empty"
            except ClientError as exc:
                status = exc.response["ResponseMetadata"].get("HTTPStatusCode", 0)
                outcome = f"{status} {exc.response['Error'].get('Code')}"
                with lock:
                    failures.append((round(time.monotonic() - begun, 2),
                                     exc.response["Error"].get("Message", "")))
            except BotoCoreError as exc:
                outcome = type(exc).__name__
            with lock:
                answers[outcome] += 1

        threads = [threading.Thread(target=consume, args=(i,), daemon=True)
                   for i in range(waits)]
        for thread in threads:
            thread.start()
        started.wait()
        time.sleep(send_after_s)
        rss_kib = _rss_kib(server.process.pid)
        tree_mib = tree_rss_mib(server.process.pid)
        def send(url: str) -> int:
            try:
                admin.send_message(QueueUrl=url, MessageBody="x")
            except (ClientError, BotoCoreError):
                return 1
            return 0

        with ThreadPoolExecutor(8) as pool:
            sent_failures = sum(pool.map(send, urls))
        for thread in threads:
            thread.join(timeout=60)
        text = "".join(lines)
        return {
            "waits": waits, "answers": dict(answers), "send_failures": sent_failures,
            "server_5xx": sum(n for k, n in answers.items() if k[:1] == "5"),
            "failures": sorted(failures)[:20],
            "pool_full_warnings": text.count(POOL_WARNING),
            "cluster_unavailable_lines": text.count("is unavailable"),
            "dmq_rss_mib_while_waiting": round(rss_kib / 1024, 1),
            "tree_rss_mib_while_waiting": round(tree_mib, 1),
            "env": extra_env,
        }
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waits", type=int, default=300)
    parser.add_argument("--send-after", type=float, default=5.0)
    parser.add_argument("--env", action="append", default=[],
                        help="NAME=VALUE for the server (repeatable)")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    print(json.dumps(run(args.waits, args.send_after, env), indent=2))


if __name__ == "__main__":
    main()
