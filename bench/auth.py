"""What authentication costs per request: p50 of SendMessage and ReceiveMessage with
DMQ_AUTH=open (any signature accepted) and DMQ_AUTH=required (each SigV4 signature verified
against the key store, botocore's signer recomputing it), one server each, on DynamoDB
Local; plus the verification alone, in process (no HTTP, no store).

    python -m bench.auth            # 300 calls of each per mode
    python -m bench.auth --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import BotoCoreError, ClientError

from bench.servers import start_dmq, wait_idle
from bench.timing import Latency, Recorder

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / ".dmq" / "bench-auth.json"
KEY, SECRET = "AKIABENCHBENCHBENCH0", "bench-secret-bench-secret-bench-secret-0"
SEND, RECEIVE = "SendMessage", "ReceiveMessage"


@dataclass(frozen=True)
class ModeResult:
    """p50/p99 of the calls against one server."""

    mode: str
    send: Latency
    receive: Latency


@dataclass(frozen=True)
class AuthFigures:
    """Both modes, and the in-process cost of one verification."""

    calls: int
    modes: list[ModeResult]
    verify_us_p50: float


def _client(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, read_timeout=60))


def _wait_answering(sqs: Any, timeout_s: float = 60.0) -> None:
    """Poll ListQueues (signed with the bench's root key) until it succeeds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sqs.list_queues()
            return
        except (BotoCoreError, ClientError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def measure_mode(mode: str, calls: int) -> ModeResult:
    """Send one, receive one (no wait), delete it, `calls` times, on a fresh server."""
    data_dir = Path(tempfile.mkdtemp(prefix="dmq-bench-auth-"))
    env = {"DMQ_AUTH": mode, "DMQ_ROOT_ACCESS_KEY_ID": KEY,
           "DMQ_ROOT_SECRET_ACCESS_KEY": SECRET}
    dmq = start_dmq(data_dir, extra_env=env)
    try:
        sqs = _client(dmq.url)
        _wait_answering(sqs)
        url = sqs.create_queue(QueueName="dmq-bench-auth")["QueueUrl"]
        for number in range(min(20, calls)):  # warm the connections and caches
            sqs.send_message(QueueUrl=url, MessageBody=f"warm-{number}")
            sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
        sqs.purge_queue(QueueUrl=url)
        wait_idle(dmq.process.pid, timeout_s=30)
        recorder = Recorder()
        for number in range(calls):
            with recorder.timed(SEND):
                sqs.send_message(QueueUrl=url, MessageBody=f"bench-{number:06d}")
            with recorder.timed(RECEIVE):
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                          WaitTimeSeconds=0).get("Messages", [])
            for message in got:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return ModeResult(mode, recorder.summary(SEND), recorder.summary(RECEIVE))
    finally:
        dmq.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def measure_verification(rounds: int) -> float:
    """p50 in microseconds of parsing and verifying one signed SendMessage in process."""
    from chalicelib.frontend.sigv4 import SignedRequest, parse, verify

    body = json.dumps({"QueueUrl": "http://127.0.0.1:9324/000000000000/q",
                       "MessageBody": "x" * 256}).encode()
    request = AWSRequest(method="POST", url="http://127.0.0.1:9324/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
    SigV4Auth(Credentials(KEY, SECRET), "sqs", "us-east-1").add_auth(request)
    headers = {k.lower(): v.decode() if isinstance(v, bytes) else v
               for k, v in request.headers.items()}
    headers["host"] = "127.0.0.1:9324"
    signed = SignedRequest("POST", "/", [], headers, body)
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        signature = parse(signed)
        assert signature is not None
        verify(signed, signature, SECRET)
        samples.append(time.perf_counter() - started)
    return round(sorted(samples)[len(samples) // 2] * 1e6, 1)


def markdown(figures: AuthFigures) -> str:
    """The figures as a Markdown table."""
    lines = [f"Authentication cost ({figures.calls} calls of each, one client, p50 / p99 ms)",
             "", "| DMQ_AUTH | SendMessage | ReceiveMessage |", "|---|---|---|"]
    for mode in figures.modes:
        lines.append(f"| {mode.mode} | {mode.send.p50_ms} / {mode.send.p99_ms} | "
                     f"{mode.receive.p50_ms} / {mode.receive.p99_ms} |")
    lines += ["", f"SigV4 verification alone (parse, botocore signer, constant-time compare): "
                  f"p50 {figures.verify_us_p50} µs per request."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run both modes, print the table, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.auth", description=__doc__)
    parser.add_argument("--calls", type=int, default=None, help="default 300; quick 30")
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    calls = args.calls or (30 if args.quick else 300)
    modes = [measure_mode(mode, calls) for mode in ("open", "required")]
    figures = AuthFigures(calls, modes, measure_verification(200 if args.quick else 2000))
    print("\n" + markdown(figures) + "\n", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(asdict(figures), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
