"""`make fuzz`: hostile requests against DMQ's HTTP front door; every answer must be a
well-formed HTTP response below 500, in the SQS error shape when it is not a 200.

    python -m bench.fuzz --cases 100000 [--seed N] [--store memory|dynamodb-local] [--url U]

Without --url it starts `python -m dmqlocal` on a free loopback port and stops it after.
A failure names the seed and case index: `Generator(seed).case(index)` rebuilds its bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from bench.fuzz_cases import CONTENT_TYPE, Case, Generator
from bench.servers import ROOT, Server, free_port

STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3}) [^\r\n]*")
QUERY_ERROR = re.compile(r"[A-Za-z0-9.]+;(Sender|Receiver)")
XML_TYPE = "text/xml"
XML_NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"
RECV_TIMEOUT_S = 30.0


class BadResponse(Exception):
    """The server's answer breaks the rules."""


@dataclass
class Report:
    """What a fuzz run saw: statuses per answer, and the cases that broke a rule."""

    seed: int
    cases: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def histogram(self) -> str:
        """One line per status, most frequent first."""
        rate = self.cases / self.seconds if self.seconds else 0.0
        lines = [f"seed {self.seed}: {self.cases} cases in {self.seconds:.1f} s "
                 f"({rate:.0f}/s), {len(self.failures)} failures"]
        lines += [f"  {count:>7}  {status}" for status, count in self.statuses.most_common()]
        return "\n".join(lines)


def exchange(host: str, port: int, data: bytes) -> bytes:
    """Send one connection's bytes, half-close, and read everything until the server closes."""
    with socket.create_connection((host, port), timeout=RECV_TIMEOUT_S) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server refused early and closed: its answer may be waiting
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def check(raw: bytes, head_first: bool) -> list[str]:
    """Each answer in `raw` as `<status> <error code>`; BadResponse when one is malformed or
    a 5xx."""
    statuses: list[str] = []
    rest = raw
    while rest:
        if b"\r\n\r\n" not in rest:
            raise BadResponse(f"an answer without the end of its head: {rest[:200]!r}")
        head, rest = rest.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        match = STATUS_LINE.fullmatch(lines[0])
        if match is None:
            raise BadResponse(f"not an HTTP/1.1 status line: {lines[0][:200]!r}")
        status = int(match.group(1))
        headers = _headers(lines[1:])
        if 100 <= status < 200:
            continue
        rest = _check_answer(status, headers, rest, head_first and not statuses)
        code = headers.get("x-amzn-query-error", "").split(";")[0]
        statuses.append(f"{status} {code}".strip())
    return statuses


def _headers(lines: list[bytes]) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise BadResponse(f"a malformed header line: {line[:200]!r}")
        headers[name.decode("latin-1").lower()] = value.decode("latin-1").strip()
    return headers


def _check_answer(status: int, headers: dict[str, str], rest: bytes, head: bool) -> bytes:
    """Check one answer's length, status and error shape; return what follows it."""
    length_text = headers.get("content-length", "")
    if not length_text.isdigit():
        raise BadResponse(f"status {status} without a Content-Length: {headers}")
    length = 0 if head else int(length_text)
    if len(rest) < length:
        raise BadResponse(f"status {status}: body shorter than its Content-Length")
    body, rest = rest[:length], rest[length:]
    if status >= 500:
        raise BadResponse(f"status {status}: {body[:300]!r}")
    if status != 200:
        _check_error_shape(status, headers, body, head)
    return rest


def _check_error_shape(status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
    if headers.get("content-type") == XML_TYPE:  # a Query request's error (a GET, a form)
        _check_xml_error(status, body, head)
        return
    if headers.get("content-type") == "application/json" and "x-amzn-errortype" in headers:
        _check_gateway_error(status, headers, body, head)  # the admin API's refusal
        return
    if headers.get("content-type") != CONTENT_TYPE:
        raise BadResponse(f"status {status} with content type {headers.get('content-type')}")
    if not QUERY_ERROR.fullmatch(headers.get("x-amzn-query-error", "")):
        raise BadResponse(f"status {status} without x-amzn-query-error: {headers}")
    if head:
        return
    try:
        error = json.loads(body)
    except ValueError as exc:
        raise BadResponse(f"status {status}: the error body is not JSON: {body[:300]!r}") \
            from exc
    if not (isinstance(error, dict) and isinstance(error.get("__type"), str)
            and isinstance(error.get("message"), str)):
        raise BadResponse(f"status {status}: not the SQS error shape: {body[:300]!r}")


def _check_gateway_error(status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
    """The admin API's errors, in API Gateway's shape: `x-amzn-ErrorType` naming the code,
    and a JSON body with that code and a message."""
    if head:
        return
    try:
        error = json.loads(body)
    except ValueError as exc:
        raise BadResponse(f"status {status}: the error body is not JSON: {body[:300]!r}") \
            from exc
    if not (isinstance(error, dict) and error.get("code") == headers["x-amzn-errortype"]
            and isinstance(error.get("message"), str)):
        raise BadResponse(f"status {status}: not API Gateway's error shape: {body[:300]!r}")


def _check_xml_error(status: int, body: bytes, head: bool) -> None:
    """The Query protocol's `<ErrorResponse>`: Type, Code and Message in its Error (or
    SQS's bare 404 `<UnknownOperationException/>` for a request naming no action)."""
    if head or (status == 404 and body == b"<UnknownOperationException/>"):
        return
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise BadResponse(f"status {status}: the error body is not XML: {body[:300]!r}") \
            from exc
    error = root.find(f"{XML_NS}Error")
    if (root.tag != f"{XML_NS}ErrorResponse" or error is None
            or error.findtext(f"{XML_NS}Type") not in ("Sender", "Receiver")
            or not error.findtext(f"{XML_NS}Code")
            or error.find(f"{XML_NS}Message") is None):
        raise BadResponse(f"status {status}: not the SQS XML error shape: {body[:300]!r}")


def run_case(host: str, port: int, case: Case) -> tuple[list[str], str | None]:
    """One case's statuses, and what went wrong (None when every rule held)."""
    raw = exchange(host, port, case.data)
    try:
        statuses = check(raw, case.head)
        if not statuses and case.data.strip():
            raise BadResponse("the connection closed without an answer")
    except BadResponse as exc:
        return [], f"case {case.index} ({case.kind}): {exc}; request {case.data[:300]!r}"
    return statuses, None


def prepare_queues(host: str, port: int, seed: int, count: int = 3) -> list[str]:
    """A few queues the cases aim at (created, or found from an earlier run)."""
    urls = []
    for i in range(count):
        body = json.dumps({"QueueName": f"fuzz-{seed}-{i}"}).encode()
        request = (b"POST / HTTP/1.1\r\nHost: " + f"{host}:{port}".encode()
                   + b"\r\nX-Amz-Target: AmazonSQS.CreateQueue\r\nContent-Type: "
                   + CONTENT_TYPE.encode() + b"\r\nContent-Length: "
                   + str(len(body)).encode() + b"\r\n\r\n" + body)
        raw = exchange(host, port, request)
        urls.append(json.loads(raw.split(b"\r\n\r\n", 1)[1])["QueueUrl"])
    return urls


def fuzz(url: str, seed: int, cases: int, workers: int = 4,
         progress: Callable[[Report], None] | None = None) -> Report:
    """Run `cases` cases against the server at `url` and report what it answered."""
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    generator = Generator(seed, f"{host}:{port}", prepare_queues(host, port, seed))
    report = Report(seed)
    lock = threading.Lock()
    started = time.monotonic()

    def one(index: int) -> None:
        statuses, failure = run_case(host, port, generator.case(index))
        with lock:
            report.cases += 1
            report.statuses.update(statuses)
            if failure:
                report.statuses["bad"] += 1
                report.failures.append(f"seed {seed} {failure}")
            if progress and report.cases % 5000 == 0:
                report.seconds = time.monotonic() - started
                progress(report)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(cases)))
    report.seconds = time.monotonic() - started
    return report


def start_server(store: str, data_dir: Path, extra_env: dict[str, str] | None = None) -> Server:
    """`python -m dmqlocal` on `store`, answering, in a session of its own."""
    import subprocess

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMQ_")}
    env.update(DMQ_STORE=store, PYTHONUNBUFFERED="1", **(extra_env or {}))
    env.setdefault("AWS_ACCESS_KEY_ID", "dmq-fuzz")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "dmq-fuzz")
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    process = subprocess.Popen(
        [sys.executable, "-m", "dmqlocal", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    server = Server("dmq", process, port, time.perf_counter(), tail=deque())
    server.drain()
    try:
        server.wait_answering()
    except BaseException:
        server.stop()
        raise
    return server


def server_faults(output: str) -> list[str]:
    """Tracebacks and unexpected errors the server logged (each is a bug), each with the
    lines that follow it."""
    lines = output.splitlines()
    return ["\n".join(lines[i:i + 40]) for i, line in enumerate(lines)
            if "Traceback" in line or "unexpected error" in line]


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz; print the status histogram; 1 when any rule broke."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--store", default="dynamodb-local",
                        choices=("dynamodb-local", "memory"))
    parser.add_argument("--url", help="an already running DMQ (default: start one)")
    args = parser.parse_args(argv)
    server = None
    data = None if args.url else tempfile.mkdtemp(prefix="dmq-fuzz-")
    try:
        if data is not None:
            server = start_server(args.store, Path(data))
        url = args.url or (server.url if server else "")
        print(f"fuzzing {url} with seed {args.seed}: {args.cases} cases", flush=True)
        report = fuzz(url, args.seed, args.cases, args.workers,
                      progress=lambda r: print(r.histogram().splitlines()[0], flush=True))
    finally:
        if server is not None:
            server.stop()
        if data is not None:
            shutil.rmtree(data, ignore_errors=True)
    faults = server_faults("".join(server.tail)) if server else []
    print(report.histogram())
    for failure in report.failures[:20]:
        print("FAIL", failure)
    for fault in faults[:5]:
        print("SERVER", fault)
    return 1 if report.failures or faults else 0


if __name__ == "__main__":
    sys.exit(main())
