"""A lean DynamoDB client for the item calls of DMQ's request path and the stream pump's
reads, over plain HTTP.

botocore spends about 1.3 ms of CPU on each DynamoDB call where sending the JSON and
reading the answer take 0.3 ms: parameter validation, the user-agent string, endpoint
rules, a walk of the request and of the answer over the model, urllib3, its signer.
DMQ's send, receive and delete are one or two item calls each, so that was most of DMQ's
own time per call (docs/benchmarks.md, "The store's floor").

`LeanDynamoDB` wraps a botocore DynamoDB (or DynamoDB Streams) client. The calls in
`CALLS` go out as the JSON protocol over a small pool of kept-alive HTTP/1.1
connections; every other attribute (table management, paginators, `exceptions`,
`meta`) is the wrapped client's. What callers and hooks see stays botocore's:

- the same events on the wrapped client's `meta.events`, with the same arguments:
  `provide-client-params`, `before-parameter-build` (botocore's own handler fills in a
  transaction's ClientRequestToken there), `before-call` (a handler may answer in the
  call's place, or raise), `before-sign` (headers a handler adds are sent, unsigned),
  `after-call`, `after-call-error`; so the cluster guards, DMQ_COUNT_DYNAMODB and chaos
  injection work unchanged (`before-send` and `request-created` are not emitted: there
  is no botocore request object);
- the same retries: each attempt's outcome goes to the client's own `needs-retry`
  handler (botocore's standard mode with its retry quota and backoff);
- the same answers and errors: a parsed answer with `ResponseMetadata`, binary values as
  bytes; a ClientError of the client's own exception classes, with the modeled fields of
  the error (`CancellationReasons`, `Item`); botocore's connection errors and timeouts.

It departs in three places. Parameters are not validated before sending (DMQ builds
them; DynamoDB refuses what is wrong). A binary attribute value must be given as bytes.
A stream record's ApproximateCreationDateTime stays as DynamoDB sends it, seconds since
the epoch (as Lambda hands records over), where botocore gives a datetime. Requests are
signed with SigV4 as botocore signs them (`Signer`; a test compares the two), so a store
that checks signatures accepts them. Only an `http://` endpoint is served this way (DMQ's
local store, DynamoDB Local, LocalStack); AWS itself and TLS endpoints keep the botocore
client whole (`wants_lean`). PynamoDB's connections are handed one too (it calls
botocore's `_make_api_call`, answered here for the same operations).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import io
import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from botocore.awsrequest import AWSResponse
from botocore.credentials import Credentials
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.hooks import first_non_none_response

# The client methods sent by this client, and their operations.
ITEM_CALLS = {
    "put_item": "PutItem", "get_item": "GetItem", "delete_item": "DeleteItem",
    "update_item": "UpdateItem", "query": "Query", "scan": "Scan",
    "batch_get_item": "BatchGetItem", "batch_write_item": "BatchWriteItem",
    "transact_write_items": "TransactWriteItems", "transact_get_items": "TransactGetItems",
}
# DynamoDB Streams: the stream pump's reads. Its records keep ApproximateCreationDateTime
# as DynamoDB sends it (seconds since the epoch, as Lambda hands it over), not a datetime.
STREAM_CALLS = {"get_records": "GetRecords"}
CALLS = {"dynamodb": ITEM_CALLS, "dynamodbstreams": STREAM_CALLS}
CONTENT_TYPE = "application/x-amz-json-1.0"
_ERROR_KEYS = frozenset({"__type", "message", "Message"})
MAX_LINE = 65536
MAX_HEADERS = 100
# What each kept connection buffers of the answers it reads: http.client's size (an answer
# longer than that is read straight into its bytes).
READ_BUFFER = 8 * 1024


class _Closed(Exception):
    """The store closed the connection before an answer began."""


class _Malformed(Exception):
    """The answer broke HTTP/1.1's framing."""


def wants_lean(endpoint: str | None, choice: str = "lean") -> bool:
    """Whether a DynamoDB endpoint gets the lean client: a plain-HTTP endpoint, unless
    DMQ_STORE_CLIENT chose botocore."""
    return choice != "botocore" and bool(endpoint) and str(endpoint).startswith("http://")


def _json_default(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"cannot send a {type(value).__name__} to DynamoDB")


def decode_binary(value: Any) -> None:
    """Turn every binary attribute value ({"B": base64} and {"BS": [...]}) of a parsed
    answer into bytes, in place, as botocore does. Only attribute values have a member
    named B or BS, whose value is a string or a list of strings (a map's key "B" holds an
    attribute value, a dict)."""
    if isinstance(value, dict):
        if len(value) == 1:
            blob = value.get("B")
            if isinstance(blob, str):
                value["B"] = base64.b64decode(blob)
                return
            blobs = value.get("BS")
            if isinstance(blobs, list) and all(isinstance(b, str) for b in blobs):
                value["BS"] = [base64.b64decode(b) for b in blobs]
                return
        for inner in value.values():
            if isinstance(inner, (dict, list)):
                decode_binary(inner)
    elif isinstance(value, list):
        for inner in value:
            if isinstance(inner, (dict, list)):
                decode_binary(inner)


class _Connection:
    """One kept-alive HTTP/1.1 connection: a socket and its buffered reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb", buffering=READ_BUFFER)

    def exchange(self, head: bytes, body: bytes) -> tuple[int, list[tuple[str, str]], bytes,
                                                          bool]:
        """Send one request; its status, headers, body, and whether the connection stays
        open. _Closed when the answer did not begin; _Malformed, TimeoutError, OSError."""
        self.sock.sendall(head + body)
        line = self.reader.readline(MAX_LINE + 1)
        if not line:
            raise _Closed
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise _Malformed
        status = int(parts[1])
        headers: list[tuple[str, str]] = []
        length: int | None = None
        chunked = False
        keep = parts[0] == b"HTTP/1.1"
        for _ in range(MAX_HEADERS + 1):
            line = self.reader.readline(MAX_LINE + 1)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            headers.append((name, value))
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif name == "connection":
                keep = value.lower() != "close" and (keep or value.lower() == "keep-alive")
        else:
            raise _Malformed
        if chunked:
            data = self._chunks()
        elif length is not None:
            data = self._exactly(length)
        else:  # no length: the body runs to the end of the connection
            data, keep = self.reader.read(), False
        return status, headers, data, keep

    def _exactly(self, length: int) -> bytes:
        data = self.reader.read(length)
        if len(data) != length:
            raise _Malformed
        return data

    def _chunks(self) -> bytes:
        out = io.BytesIO()
        while True:
            size = int(self.reader.readline(MAX_LINE + 1).split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self.reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return out.getvalue()
            out.write(self._exactly(size))
            self._exactly(2)

    def readable_now(self) -> bool:
        """True when the idle connection has something to read (its end, most likely)."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        return bool(poller.poll(0))

    def close(self) -> None:
        """Close the reader and the socket."""
        self.reader.close()
        self.sock.close()


class _Connections:
    """Kept-alive connections to one endpoint: taken by one call at a time, at most
    `size` kept idle (more may be open at once; the extra ones close after their call)."""

    def __init__(self, host: str, port: int, connect_timeout_s: float,
                 read_timeout_s: float, size: int) -> None:
        self.host, self.port = host, port
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._size = max(1, size)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def take(self) -> _Connection | None:
        """A connection kept from an earlier call that the store has not closed, or
        None. (A kept connection that shows anything to read was closed by the store, or
        broke: it is dropped, as urllib3 drops one.)"""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if not connection.readable_now():
                return connection
            connection.close()

    def open(self) -> _Connection:
        """A new connection, within the connect timeout; its reads wait the read
        timeout. TimeoutError or OSError when it cannot be made."""
        sock = socket.create_connection((self.host, self.port), self._connect_timeout_s)
        sock.settimeout(self._read_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(sock)

    def give_back(self, connection: _Connection) -> None:
        """Keep a connection whose answer was read in full, or close it."""
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


@dataclass
class _Unsigned:
    """The request as a `before-sign` hook sees it: headers it may add to."""

    url: str
    headers: dict[str, str]
    body: bytes
    context: dict[str, Any]
    method: str = "POST"


class _Raw:
    """An answer's body as botocore's AWSResponse reads it (`content` calls `stream`)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> list[bytes]:
        """The body, in one piece."""
        return [self._data]


class Signer:
    """SigV4 for DynamoDB's JSON protocol (POST / with a fixed set of headers), as
    botocore's SigV4Auth signs it, with the day's signing key kept."""

    def __init__(self, credentials: Credentials, region: str, host: str,
                 service: str = "dynamodb") -> None:
        self._credentials = credentials
        self._region = region
        self._host = host
        self._service = service
        self._keys: tuple[str, str, bytes] | None = None  # (day, secret, key)

    def _key(self, day: str, secret: str) -> bytes:
        kept = self._keys
        if kept is not None and kept[0] == day and kept[1] == secret:
            return kept[2]
        key = f"AWS4{secret}".encode()
        for part in (day, self._region, self._service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._keys = (day, secret, key)
        return key

    def headers(self, target: str, body: bytes,
                now: datetime.datetime | None = None) -> dict[str, str]:
        """The request's headers, Authorization included."""
        frozen = self._credentials.get_frozen_credentials()
        stamp = (now or datetime.datetime.now(datetime.UTC)).strftime(
            "%Y%m%dT%H%M%SZ")
        day = stamp[:8]
        signed = {"content-type": CONTENT_TYPE, "host": self._host, "x-amz-date": stamp,
                  "x-amz-target": target}
        if frozen.token:
            signed["x-amz-security-token"] = frozen.token
        names = sorted(signed)
        canonical = "\n".join(["POST", "/", "", *(f"{n}:{' '.join(signed[n].split())}"
                                                  for n in names), "",
                               ";".join(names), hashlib.sha256(body).hexdigest()])
        scope = f"{day}/{self._region}/{self._service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        signature = hmac.new(self._key(day, frozen.secret_key or ""), to_sign.encode(),
                             hashlib.sha256).hexdigest()
        signed["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={frozen.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}")
        return signed


# The botocore events a call emits, in order (`after-call-error` in place of `after-call`
# when no answer came; `needs-retry` after each attempt that did not succeed).
_EVENTS = ("provide-client-params", "before-parameter-build", "before-call", "needs-retry",
           "before-sign", "after-call", "after-call-error")


class LeanDynamoDB:
    """A botocore DynamoDB (or DynamoDB Streams) client whose item calls (`CALLS`) skip
    botocore's request and response machinery; see the module's docstring."""

    def __init__(self, client: Any, endpoint: str, credentials: Credentials | None,
                 connect_timeout_s: float, read_timeout_s: float, pool_size: int,
                 calls: dict[str, str] | None = None) -> None:
        """`calls`: the client methods sent this way, and their operations: the
        service's entry in `CALLS` unless given (any JSON 1.0 service's calls may be)."""
        parts = urlsplit(endpoint)
        self._client = client
        self._url = f"http://{parts.netloc}/"
        self._connections = _Connections(parts.hostname or "127.0.0.1", parts.port or 80,
                                         connect_timeout_s, read_timeout_s, pool_size)
        self._region = client.meta.region_name
        self._host = parts.netloc
        self._signer = (Signer(credentials, self._region, parts.netloc,
                               client.meta.service_model.signing_name)
                        if credentials is not None else None)
        model = client.meta.service_model
        calls = CALLS[model.service_name] if calls is None else calls
        self._events_of = model.service_id.hyphenize()
        self._target = str(model.metadata["targetPrefix"]) + "."
        self._models = {op: model.operation_model(op) for op in calls.values()}
        # Each operation's event names, made once: a call emits six.
        self._events = {op: {event: f"{event}.{self._events_of}.{op}" for event in _EVENTS}
                         for op in calls.values()}
        # botocore's standard retry mode never retries an answer below 300: such an
        # answer skips its `needs-retry` handlers (legacy mode's may, on a checksum).
        self._success_is_final = (client.meta.config.retries or {}).get("mode") == "standard"
        for method, operation in calls.items():
            setattr(self, method, self._method(operation))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _make_api_call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """botocore's own entry point, which PynamoDB calls: the operations this client
        sends go this way, any other to the wrapped client."""
        if operation in self._models:
            return self.call(operation, params)
        return cast(dict[str, Any], self._client._make_api_call(operation, params))

    def close(self) -> None:
        """Close the kept connections (and the wrapped client's)."""
        self._connections.close()
        self._client.close()

    def _method(self, operation: str) -> Callable[..., dict[str, Any]]:
        def call(**params: Any) -> dict[str, Any]:
            return self.call(operation, params)
        call.__name__ = operation
        return call

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """One API call, as botocore's `_make_api_call` makes it."""
        model = self._models[operation]
        names = self._events[operation]
        events = self._client.meta.events
        context: dict[str, Any] = {
            "client_region": self._region, "client_config": self._client.meta.config,
            "has_streaming_input": False, "auth_type": None}
        params = dict(first_non_none_response(events.emit(
            names["provide-client-params"], params=params,
            model=model, context=context), default=params))
        events.emit(names["before-parameter-build"], params=params,
                    model=model, context=context)
        request = {
            "url_path": "/", "query_string": "", "method": "POST", "url": self._url,
            "headers": {"X-Amz-Target": self._target + operation,
                        "Content-Type": CONTENT_TYPE},
            "body": json.dumps(params, default=_json_default,
                               separators=(",", ":")).encode("utf-8"),
            "context": context,
        }
        _, answer = events.emit_until_response(
            names["before-call"], model=model, params=request,
            request_signer=None, context=context)
        if answer is not None:
            http_response, parsed = answer
        else:
            try:
                http_response, parsed = self._send(model, request)
            except Exception as exc:
                events.emit(names["after-call-error"], exception=exc,
                            context=context)
                raise
        events.emit(names["after-call"], http_response=http_response,
                    parsed=parsed, model=model, context=context)
        if http_response.status_code >= 300:
            code = parsed.get("Error", {}).get("Code")
            raise self._client.exceptions.from_code(code)(parsed, operation)
        return dict(parsed)

    def _send(self, model: Any, request: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        """Attempts until one answers for good, as the client's retry handler decides."""
        events = self._client.meta.events
        attempts = 0
        while True:
            attempts += 1
            answer: tuple[AWSResponse, dict[str, Any]] | None = None
            caught: Exception | None = None
            try:
                answer = self._attempt(request, attempts - 1)
            except (ConnectionClosedError, ConnectTimeoutError, EndpointConnectionError,
                    ReadTimeoutError) as exc:
                caught = exc
            if answer is not None and answer[0].status_code < 300 and self._success_is_final:
                return answer
            delay = first_non_none_response(events.emit(
                self._events[model.name]["needs-retry"], response=answer, endpoint=self,
                operation=model, attempts=attempts, caught_exception=caught,
                request_dict=request))
            if delay is None:
                if caught is not None:
                    raise caught
                assert answer is not None
                return answer
            time.sleep(float(delay))

    def _head(self, request: dict[str, Any]) -> bytes:
        """The request line and headers, signed (unless there are no credentials); a
        header a `before-call` or `before-sign` hook added (such as Lambda's trace id)
        goes unsigned."""
        headers: dict[str, str] = request["headers"]
        body: bytes = request["body"]
        target = headers["X-Amz-Target"]
        self._client.meta.events.emit(
            f"before-sign.{self._events_of}.{target.rsplit('.', 1)[-1]}",
            request=_Unsigned(self._url, headers, body, request["context"]),
            signing_name=self._client.meta.service_model.signing_name,
            region_name=self._region, signature_version="v4", request_signer=None,
            operation_name=target.rsplit(".", 1)[-1])
        if self._signer is not None:
            lines = self._signer.headers(target, body)
        else:
            lines = {"content-type": CONTENT_TYPE, "host": self._host, "x-amz-target": target}
        lines.update((k, v) for k, v in headers.items()
                     if k not in ("X-Amz-Target", "Content-Type"))
        lines["content-length"] = str(len(body))
        return ("POST / HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in lines.items())
                + "\r\n").encode("latin-1")

    def _attempt(self, request: dict[str, Any],
                 retries: int) -> tuple[AWSResponse, dict[str, Any]]:
        """One HTTP exchange: the answer, or a botocore connection error."""
        head, body = self._head(request), request["body"]
        connection = self._connections.take() or self._connect()
        try:
            status, headers, data, keep = connection.exchange(head, body)
        except TimeoutError as exc:
            connection.close()
            raise ReadTimeoutError(endpoint_url=self._url) from exc
        except (_Closed, _Malformed, OSError, ValueError) as exc:
            connection.close()
            raise ConnectionClosedError(endpoint_url=self._url) from exc
        if keep:
            self._connections.give_back(connection)
        else:
            connection.close()
        return self._parsed(status, headers, data, retries)

    def _connect(self) -> _Connection:
        try:
            return self._connections.open()
        except TimeoutError as exc:
            raise ConnectTimeoutError(endpoint_url=self._url) from exc
        except OSError as exc:
            raise EndpointConnectionError(endpoint_url=self._url) from exc

    def _parsed(self, status: int, header_list: list[tuple[str, str]], data: bytes,
                retries: int) -> tuple[AWSResponse, dict[str, Any]]:
        """The answer as botocore parses it: its body (binary values as bytes) and its
        ResponseMetadata; an error as {"Error": {Code, Message}} with its other fields."""
        headers = dict(header_list)
        # AWSResponse keeps the headers as a case-insensitive HeadersDict of this mapping.
        http_response = AWSResponse(self._url, status, cast(Any, headers), _Raw(data))
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {"message": data[:200].decode("utf-8", "replace")} if status >= 300 else {}
        if b'"B' in data:
            decode_binary(body)
        metadata = {"RequestId": headers.get("x-amzn-requestid", ""),
                    "HTTPStatusCode": status, "HTTPHeaders": headers,
                    "RetryAttempts": retries}
        if status < 300:
            body["ResponseMetadata"] = metadata
            return http_response, body
        code = str(body.get("__type") or headers.get("x-amzn-errortype", "") or status)
        parsed = {key: value for key, value in body.items() if key not in _ERROR_KEYS}
        parsed["Error"] = {"Code": code.rsplit("#", 1)[-1].split(":", 1)[0],
                           "Message": str(body.get("message", body.get("Message", "")))}
        parsed["ResponseMetadata"] = metadata
        return http_response, parsed

