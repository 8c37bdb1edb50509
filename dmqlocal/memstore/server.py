"""The in-memory store's HTTP front: DynamoDB's and DynamoDB Streams' JSON protocol over
kept-alive HTTP/1.1 connections, a thread per connection, on a loopback address.

Signatures are not checked (the store listens on loopback only, as DynamoDB Local
does); the access key and region of the signature's credential scope pick the database,
as DynamoDB Local without `-sharedDb` does."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from typing import Any, BinaryIO, cast

from dmqlocal.memstore.engine import Engine
from dmqlocal.memstore.errors import PREFIX, StoreError

logger = logging.getLogger("dmq.memstore")
TARGETS = ("DynamoDB_20120810.", "DynamoDBStreams_20120810.")
MAX_BODY = 16 * 1024 * 1024
MAX_HEADER_LINES = 100
ACCEPT_WAIT_S = 0.2
DEFAULT_REGION = "us-east-1"


def _scope(authorization: str) -> tuple[str, str]:
    """The access key and region of a SigV4 Authorization header."""
    marker = "Credential="
    at = authorization.find(marker)
    if at < 0:
        return "", DEFAULT_REGION
    parts = authorization[at + len(marker):].split(",", 1)[0].split("/")
    if len(parts) < 3:
        return parts[0], DEFAULT_REGION
    return parts[0], parts[2]


def _answer(status: int, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body, separators=(",", ":")).encode()
    reason = "OK" if status == 200 else "Bad Request" if status == 400 else "Error"
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.0\r\n"
            f"Content-Length: {len(payload)}\r\nx-amzn-RequestId: {os.urandom(8).hex()}"
            "\r\n\r\n")
    return head.encode() + payload


def _error(error: StoreError) -> bytes:
    return _answer(error.status, error.body())


class StoreServer:
    """Listens on a loopback port and answers until `stop` is set."""

    def __init__(self, engine: Engine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(ACCEPT_WAIT_S)
        self.port = int(self._listener.getsockname()[1])
        self.stop = threading.Event()

    def serve(self) -> None:
        """Accept connections until stopped; then close the listener."""
        try:
            while not self.stop.is_set():
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stop.is_set():
                        break
                    raise
                connection.settimeout(None)
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(target=self._serve_connection, args=(connection,),
                                 name="memstore-connection", daemon=True).start()
        finally:
            self._listener.close()

    def _serve_connection(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rb", buffering=64 * 1024) as reader:
            try:
                while not self.stop.is_set():
                    answer = self._one_request(cast(BinaryIO, reader))
                    if answer is None:
                        return
                    connection.sendall(answer)
            except OSError:
                return

    def _one_request(self, reader: BinaryIO) -> bytes | None:
        """Read and answer one request; None when the peer closed or broke the framing."""
        line = reader.readline(8192)
        if not line or not line.strip():
            return None
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADER_LINES):
            header = reader.readline(65536)
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            return None
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            return None
        if not 0 <= length <= MAX_BODY:
            return None
        body = reader.read(length) if length else b""
        if len(body) != length:
            return None
        return self.answer(headers, body)

    def answer(self, headers: dict[str, str], body: bytes) -> bytes:
        """The whole HTTP answer to one call."""
        target = headers.get("x-amz-target", "")
        operation = next((target[len(p):] for p in TARGETS if target.startswith(p)), None)
        if operation is None:
            return _error(StoreError("UnknownOperationException",
                                     f"Unknown target: {target or '(none)'}"))
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return _error(StoreError("SerializationException",
                                     "The request body is not valid JSON"))
        access_key, region = _scope(headers.get("authorization", ""))
        try:
            return _answer(200, self.engine.call(access_key, region, operation, request))
        except StoreError as error:
            return _error(error)
        except Exception as exc:  # noqa: BLE001 - one bad call must not end the store
            logger.error("memory store: %s failed: %s: %s", operation,
                         type(exc).__name__, exc)
            return _answer(500, {"__type": PREFIX + "InternalServerError",
                                 "message": f"{type(exc).__name__}: {exc}"})
