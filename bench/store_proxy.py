"""A counting HTTP proxy in front of DynamoDB Local: every store request of a DMQ server
pointed at it (DMQ_DYNAMODB_ENDPOINT), whichever client made it (boto3, PynamoDB, the
stream pump's DynamoDB Streams client), is counted at the store boundary, by operation
and time, and a GetRecords answer that carried records is noted as such. For the item
operations it also notes how many items a request wrote or read (a batch's or a
transaction's entries, a Query's or Scan's items read) and whether it asked for a
consistent read, which is what DynamoDB's request units are counted from."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer",
                         "upgrade", "proxy-authorization", "proxy-authenticate"})


@dataclass(frozen=True)
class StoreCall:
    """One request as the proxy saw it: when it was answered, its operation, whether it
    read stream records (a GetRecords whose answer was not empty), how many items it
    wrote or read, and whether it asked for a consistent read."""

    at: float  # time.monotonic() when the answer came back
    operation: str
    records: bool
    items: int = 1  # a batch's or transaction's entries; a Query's or Scan's ScannedCount
    consistent: bool = False  # ConsistentRead (GetItem, BatchGetItem, Query, Scan)
    tables: tuple[str, ...] = ()  # the tables it names ("" for a stream's requests)


_SHAPED = frozenset({"BatchWriteItem", "BatchGetItem", "TransactWriteItems",
                     "TransactGetItems", "Query", "Scan", "GetItem"})


def _json(data: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _shape(operation: str, body: bytes, answer: bytes) -> tuple[int, bool]:
    """Items written or read by one item operation, and whether it read consistently."""
    if operation not in _SHAPED:
        return 1, False
    request = _json(body)
    tables = request.get("RequestItems") or {}
    if operation == "BatchWriteItem":
        return sum(len(entries) for entries in tables.values()), False
    if operation == "BatchGetItem":
        return (sum(len(t.get("Keys", [])) for t in tables.values()),
                any(bool(t.get("ConsistentRead")) for t in tables.values()))
    if operation.startswith("Transact"):
        return len(request.get("TransactItems") or []), False
    consistent = bool(request.get("ConsistentRead"))
    if operation == "GetItem":
        return 1, consistent
    return int(_json(answer).get("ScannedCount", 0)), consistent


def _tables(body: bytes) -> tuple[str, ...]:
    """The tables a request names: TableName, a batch's RequestItems, a transaction's."""
    request = _json(body)
    names = [str(request["TableName"])] if "TableName" in request else []
    names += [str(t) for t in request.get("RequestItems") or {}]
    for entry in request.get("TransactItems") or []:
        names += [str(op.get("TableName", "")) for op in entry.values() if isinstance(op, dict)]
    return tuple(sorted(set(names)))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        """No Nagle delay: a reply written in parts would otherwise wait for the client's
        delayed ACK (about 40 ms on Linux) before its second part left."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the counts are the output."""

    def do_POST(self) -> None:
        self._forward()

    def do_GET(self) -> None:
        self._forward()

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        target = str(self.headers.get("X-Amz-Target") or "")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream = http.client.HTTPConnection(self.server.upstream_host,
                                              self.server.upstream_port, timeout=120)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        finally:
            upstream.close()
        operation = target.rsplit(".", 1)[-1] if target else self.command
        items, consistent = _shape(operation, body, data)
        self.server.note(StoreCall(time.monotonic(), operation,
                                   operation == "GetRecords" and b'"Records":[{' in data,
                                   items, consistent, _tables(body)))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.lock = threading.Lock()
        self.calls: list[StoreCall] = []

    def note(self, call: StoreCall) -> None:
        with self.lock:
            self.calls.append(call)


class CountingProxy:
    """Forwards to `upstream` (DynamoDB Local's endpoint) and keeps every call it passed."""

    def __init__(self, upstream: str) -> None:
        self._server = _Server(upstream)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="store-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        """The URL to give DMQ as its DynamoDB endpoint."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> CountingProxy:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def calls(self, since: float = float("-inf"), until: float = float("inf")) -> list[StoreCall]:
        """The calls answered in [since, until) (time.monotonic())."""
        with self._server.lock:
            return [c for c in self._server.calls if since <= c.at < until]

    def by_operation(self, since: float, until: float = float("inf")) -> dict[str, int]:
        """How many calls of each operation were answered in [since, until)."""
        return dict(sorted(Counter(c.operation for c in self.calls(since, until)).items()))

    def first_records_after(self, since: float) -> float | None:
        """When the first GetRecords that returned records after `since` was answered."""
        return next((c.at for c in self.calls(since) if c.records), None)
