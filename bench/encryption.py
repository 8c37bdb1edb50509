"""What encryption at rest costs: the p50 of SendMessage and ReceiveMessage on a queue
with SSE on (SqsManagedSseEnabled, the default) and on one with it off, over HTTP
against the local server on its default store, for a small and a large body.

The two queues take turns call by call, so that both see the same server, store and
machine load. The in-process cost of sealing and opening one message is measured too
(no I/O: AES-256-GCM with a cached data key).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.servers import start_dmq
from bench.sqs import body, sqs_client
from bench.timing import Recorder
from chalicelib.clock import SystemClock
from chalicelib.domain.messages import AttributeValue, Message
from chalicelib.domain.queues import QueueRecord
from chalicelib.encryption.envelope import MessageCipher
from chalicelib.encryption.keys import LocalKeys

SIZES = (256, 65_536)


@dataclass(frozen=True)
class EncryptionResult:
    """p50 latencies in ms with SSE off and on, for one body size."""

    body_bytes: int
    calls: int
    send_off_ms: float
    send_on_ms: float
    receive_off_ms: float
    receive_on_ms: float
    seal_us: float
    open_us: float


def _in_process(size: int, rounds: int) -> tuple[float, float]:
    """Median microseconds to seal and to open one message (three attributes)."""
    cipher = MessageCipher(LocalKeys(None), "dmq/sse-sqs", SystemClock())
    queue = QueueRecord(account="000000000000", name="bench", region="us-east-1",
                        attributes={"SqsManagedSseEnabled": "true"})
    attributes = {f"a{i}": AttributeValue("String", string_value="v" * 32) for i in range(3)}
    seal: list[float] = []
    opened: list[float] = []
    for number in range(rounds):
        message = Message(message_id=f"m-{number}", body=body(number, size), body_md5="",
                          sent_ms=0, visible_at=0, expires_ms=0, attributes=attributes)
        started = time.perf_counter()
        sealed = cipher.seal(queue, message)
        seal.append(time.perf_counter() - started)
        started = time.perf_counter()
        cipher.open(queue, sealed)
        opened.append(time.perf_counter() - started)
    return (round(sorted(seal)[len(seal) // 2] * 1e6, 1),
            round(sorted(opened)[len(opened) // 2] * 1e6, 1))


def _over_http(endpoint: str, size: int, calls: int) -> EncryptionResult:
    sqs = sqs_client(endpoint)
    urls = {
        "on": sqs.create_queue(QueueName=f"dmq-bench-sse-on-{size}")["QueueUrl"],
        "off": sqs.create_queue(QueueName=f"dmq-bench-sse-off-{size}", Attributes={
            "SqsManagedSseEnabled": "false"})["QueueUrl"],
    }
    recorder = Recorder()
    for number in range(calls):
        for mode, url in urls.items():
            with recorder.timed(f"send-{mode}"):
                sqs.send_message(QueueUrl=url, MessageBody=body(number, size))
            with recorder.timed(f"receive-{mode}"):
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                          WaitTimeSeconds=0).get("Messages", [])
            for message in got:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    for url in urls.values():
        sqs.delete_queue(QueueUrl=url)
    seal_us, open_us = _in_process(size, max(calls, 200))
    return EncryptionResult(
        size, calls,
        recorder.summary("send-off").p50_ms, recorder.summary("send-on").p50_ms,
        recorder.summary("receive-off").p50_ms, recorder.summary("receive-on").p50_ms,
        seal_us, open_us)


def measure(calls: int) -> list[EncryptionResult]:
    """Start the server on a fresh data folder, measure every size, stop it."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-sse-"))
    try:
        dmq = start_dmq(data_dir)
        try:
            dmq.wait_answering()
            return [_over_http(dmq.url, size, calls) for size in SIZES]
        finally:
            dmq.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def table(results: list[EncryptionResult]) -> str:
    """The Markdown table of the results."""
    lines = ["### Encryption at rest (p50, ms; SSE off vs on)", "",
             "| body | calls | send off | send on | receive off | receive on "
             "| seal (µs, in process) | open (µs, in process) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.body_bytes:,} B | {r.calls} | {r.send_off_ms} | {r.send_on_ms} "
              f"| {r.receive_off_ms} | {r.receive_on_ms} | {r.seal_us} | {r.open_us} |"
              for r in results]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[EncryptionResult]:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.encryption", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=None, help="per queue (default 300)")
    parser.add_argument("--quick", action="store_true", help="30 calls per queue")
    args = parser.parse_args(argv)
    results = measure(args.calls or (30 if args.quick else 300))
    print("\n" + table(results) + "\n", flush=True)
    return results


if __name__ == "__main__":
    main()
