"""A threaded HTTP/1.1 server for the Chalice app, with TCP_NODELAY on every connection,
over TLS when given a context (`tls.py`).

Framing is strict (`http_framing.py`), every error is in the SQS JSON error shape
(`http_errors.py`), and reading a request is bounded in time: a kept-alive connection
waits `idle_timeout_s` for its next request line, and a started request must arrive in
full (headers and body) within `request_timeout_s`. Composing the response (a long poll
of up to 20 s) is not bounded: only reading the request is.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from chalice import Chalice
from chalice.config import Config
from chalice.local import LocalGatewayException, RouteMatcher

from chalicelib.service import parking
from chalicelib.settings import Settings
from dmqlocal import http_headers
from dmqlocal.connection import Connection, ConnectionGateway, trusted_headers
from dmqlocal.connection_pool import HOT_S, ConnectionPool, PooledConnection, fd_room, refuse
from dmqlocal.http_errors import HttpError, Reply, is_sqs_error, reshaped, sqs_error
from dmqlocal.http_framing import READ_SIZE, DeadlineSocketIO, arrived, read_body
from dmqlocal.per_thread import serve_from_threads

logger = logging.getLogger("dmq.local")
# Chalice's local gateway cannot evaluate the IAM authorizer of the admin routes and warns
# that it lets every request through. DMQ's own middleware (admin_credentials, in
# chalicelib/handlers/admin_routes.py) checks the admin signature on those routes locally,
# so the warning would be false.
warnings.filterwarnings("ignore", message=r".*will be authorized to allow local testing",
                        category=UserWarning)
# A local-only GET path answered beside the app: () -> (status, headers, body).
Route = Callable[[], tuple[int, dict[str, str], Any]]
# The front door of app requests: (method, path, headers, body) -> a context in which the
# request is served, giving None to go on or the reply that refuses it.
Gate = Callable[[str, str, dict[str, str], bytes], AbstractContextManager[Reply | None]]
MAX_REQUEST_LINE = 65536
MAX_BLANK_LINES = 4
LINGER_S = 1.0  # after refusing a request, how long its unread bytes are drained
LINGER_BYTES = 16 * 1024 * 1024
NO_BODY_STATUSES = (204, 304)
# Each open connection's read buffer (http.client's size): it is held while the connection
# waits, idle or in a long poll, so it is a cost per waiting consumer. A body larger than
# the buffer is read straight into its own bytes.
READ_BUFFER = 8 * 1024
# A request's serving: suspended at each park of its long poll (`parking.serving`).
Serving = Generator[parking.Continuation, None, None]


@dataclass(frozen=True)
class HttpLimits:
    """How long the server waits for requests, and how large a body it reads."""

    idle_timeout_s: float = 60.0
    request_timeout_s: float = 10.0
    max_body_bytes: int = 8 * 1024 * 1024
    max_connections: int = 4096

    @classmethod
    def of(cls, settings: Settings) -> HttpLimits:
        """The limits the settings name (DMQ_HTTP_*)."""
        return cls(settings.http_idle_timeout_s, settings.http_request_timeout_s,
                   settings.http_max_body_bytes, settings.http_max_connections)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gateway: ConnectionGateway
    matcher: RouteMatcher
    routes: dict[str, Route] = {}
    limits: HttpLimits = HttpLimits()
    https = False  # served over TLS: queue URLs say https, as behind API Gateway
    trusted_proxies: tuple[str, ...] = ()  # peers whose forwarded headers the app may see
    gate: Gate | None = None  # the front door (admission) of the app's SQS requests
    _handshake_failed = False
    _headers_buffer: list[bytes]  # http.server's: the answer's head, until it is written

    def __init__(self, request: Any, client_address: Any, server: Any) -> None:
        # Unlike socketserver's handlers, set up in the connection's first thread (the TLS
        # handshake included) and then serving requests as they come (`serve_ready`); the
        # connection pool holds the connection, without a thread, while it is idle.
        self.request, self.client_address, self.server = request, client_address, server
        self._ready = False
        self._parked: tuple[Serving, contextvars.Context, parking.Continuation] | None = None

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self._handshake()
        super().setup()
        # Without this, keep-alive requests stall ~40 ms on delayed ACKs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile.close()
        self._socket_in = DeadlineSocketIO(self.connection)
        self.rfile = self._reader = io.BufferedReader(self._socket_in, READ_BUFFER)

    def _handshake(self) -> None:
        """The TLS handshake, in this connection's thread and within the request time limit
        (never in the accepting thread, which a slow client would stall). A client that
        refuses the certificate, or speaks plain HTTP, is disconnected."""
        sock = self.request
        sock.settimeout(self.limits.request_timeout_s)
        try:
            sock.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            logger.debug("TLS handshake failed: %s", exc)
            self._handshake_failed = True
        sock.settimeout(None)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the request log quiet; errors still reach the logger."""

    def serve_ready(self) -> bool | parking.Continuation:
        """Serve the request that has begun to arrive, and the next ones while they come
        within HOT_S; True when the connection stays open (idle), False when it is done
        (closed by either side, refused, or a peer that goes away or stalls). A long poll
        that parks gives its continuation: the connection is served again, from where it
        stopped, once that calls back (`parking`)."""
        try:
            resumed = self._parked
            if resumed is None and not self._ready:
                begun = self._begin()
                if begun is not None:
                    return begun
            while True:
                if resumed is not None:
                    serving, context, _ = resumed
                    resumed = None
                else:
                    self.close_connection = True
                    serving, context = self._handle_one(), contextvars.copy_context()
                parked = self._advance(serving, context)
                if parked is not None:
                    return parked
                if self.close_connection:
                    return False
                if not self._next_request_soon():
                    return True
        except OSError:  # reset, broken pipe, or a timeout while writing
            return False

    def _begin(self) -> bool | None:
        """A new connection's set-up (its TLS handshake included): None to serve its first
        request, or what `serve_ready` answers."""
        self._ready = True
        self.setup()
        if self._handshake_failed:
            return False
        if not self._next_request_soon():  # a TLS handshake, no request yet
            return True
        return None

    def _advance(self, serving: Serving,
                 context: contextvars.Context) -> parking.Continuation | None:
        """Run a request's serving, in its own context (kept while it is parked), until it
        is answered (None) or parks (its continuation; the serving is kept in `_parked`)."""
        self._parked = None
        try:
            continuation = context.run(serving.send, None)
        except StopIteration:
            return None
        self._parked = (serving, context, continuation)
        return continuation

    def _next_request_soon(self) -> bool:
        """True when the next request has begun to arrive, or does within HOT_S."""
        if arrived(self._reader, self._socket_in):
            return True
        poller = select.poll()
        poller.register(self.connection, select.POLLIN)
        return bool(poller.poll(HOT_S * 1000))

    def close(self) -> None:
        """End the connection: a parked request's serving, its streams, then the socket."""
        if self._parked is not None:
            serving, context, _ = self._parked
            self._parked = None
            context.run(serving.close)
        if self._ready:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.finish()
        with contextlib.suppress(OSError):
            self.request.shutdown(socket.SHUT_WR)
        self.request.close()

    def _handle_one(self) -> Serving:
        """Read one request within the time limits, then serve it (parking where its
        long poll parks)."""
        self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
        # Bytes have arrived (an idle connection waits in the pool, not here).
        self._socket_in.deadline = time.monotonic() + self.limits.request_timeout_s
        try:
            self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        except TimeoutError:  # stalled before a request line: close without a word
            self.close_connection = True
            return
        for _ in range(MAX_BLANK_LINES):  # blank lines before a request are ignored
            if self.raw_requestline not in (b"\r\n", b"\n"):
                break
            self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if not self.raw_requestline:
            self.close_connection = True
            return
        self._socket_in.deadline = time.monotonic() + self.limits.request_timeout_s
        try:
            yield from self._serve_one()
        except TimeoutError:
            if self._socket_in.deadline is None:  # writing the answer stalled: just close
                self.close_connection = True
                return
            self._reply(*sqs_error(408, "The request did not arrive in full within "
                                        f"{self.limits.request_timeout_s:g} s."), close=True)
        except HttpError as exc:
            self._reply(*sqs_error(exc.status, exc.message, exc.code), close=True)
        self.wfile.flush()

    def _serve_one(self) -> Serving:
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            raise HttpError(414, "The request line is too long.")
        if not self.raw_requestline.strip():
            raise HttpError(400, "The request line is empty.")
        if not self.parse_request():
            return  # parse_request answered with send_error
        if self.request_version == "HTTP/0.9":
            raise HttpError(400, "HTTP/0.9 requests are not served: use HTTP/1.1.")
        body = read_body(self.headers, self.rfile, self.limits.max_body_bytes)
        self._socket_in.deadline = None
        # Writing the answer must not hang on a client that stopped reading.
        self.connection.settimeout(self.limits.request_timeout_s)
        reply = yield from self._respond(body)
        self._reply(*reply, close=False)

    def _respond(self, body: bytes) -> Generator[parking.Continuation, None, Reply]:
        """The app's answer (or a local route's), errors in the SQS shape."""
        connection = Connection(str(self.client_address[0]), self.https)
        headers = trusted_headers({k.lower(): v for k, v in self.headers.items()}, connection,
                                  self.trusted_proxies)
        try:
            route = self.routes.get(self.path) if self.command in ("GET", "HEAD") else None
            if route is not None:
                status, out_headers, payload = route()
            elif not self._known_path():
                return sqs_error(404, f"No SQS operation at {self.path[:200]!r}: SQS "
                                      "requests are POST /.")
            else:
                status, out_headers, payload = yield from self._through_gate(
                    connection, headers, body)
        except LocalGatewayException as exc:
            status, out_headers, payload = exc.CODE, exc.headers, exc.body
        except Exception:  # a fault is an SQS InternalError, never a hang-up
            logger.exception("unexpected error")
            return sqs_error(500, "We encountered an internal error. Please try again.")
        data = payload if isinstance(payload, bytes) else (payload or "").encode("utf-8")
        if status >= 400 and not is_sqs_error(out_headers) and not _is_page(out_headers):
            return reshaped(status, out_headers, data)
        return status, {k: str(v) for k, v in out_headers.items()}, data

    def _through_gate(self, connection: Connection, headers: dict[str, str], body: bytes
                      ) -> Generator[parking.Continuation, None, tuple[int, Any, Any]]:
        """The app's answer, once the front door admitted the request (its refusal else)."""
        with contextlib.ExitStack() as admitted:
            if self.gate is not None:
                refused = admitted.enter_context(
                    self.gate(self.command, self.path, headers, body))
                if refused is not None:
                    return refused
            # A long poll the app parks is kept here, in the suspended serving, without a
            # thread, and served again when woken (chalicelib/service/parking.py).
            response = yield from parking.serving(lambda: self.gateway.serve(
                connection, self.command, self.path, headers, body))
            return (response["statusCode"], response.get("headers") or {},
                    response.get("body"))

    def _known_path(self) -> bool:
        try:
            self.matcher.match_route(self.path)
        except ValueError:
            return False
        return True

    def _reply(self, status: int, headers: Mapping[str, str], data: bytes,
               close: bool) -> None:
        """Status, headers and (unless HEAD, 204 or 304) the body; `close` ends the
        connection after it (the request's framing was broken)."""
        if self.request_version not in ("HTTP/1.0", "HTTP/1.1"):
            self.request_version = "HTTP/1.1"  # a refused request still gets a full answer
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
        # Status line, headers and body in one write: one send, one wake-up of the client
        # (two writes cost a second system call, and the client may run between them).
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD" and status not in NO_BODY_STATUSES:
            self._headers_buffer.append(data)
        self.wfile.write(b"".join(self._headers_buffer))
        self._headers_buffer = []
        if close:
            self._linger()

    def _linger(self) -> None:
        """Drain what the client still sends before closing: closing with unread bytes
        sends a reset, which can destroy the error answer before the client reads it."""
        self.close_connection = True
        deadline = time.monotonic() + LINGER_S
        self._socket_in.deadline = deadline
        drained = 0
        try:
            self.connection.shutdown(socket.SHUT_WR)
            while drained < LINGER_BYTES and time.monotonic() < deadline:
                data = self.rfile.read1(READ_SIZE)
                if not data:
                    break
                drained += len(data)
        except OSError:  # the client is gone, or went quiet: either way, done
            pass

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """http.server's own errors (bad request line, headers too large) in the SQS shape.
        A request line naming HTTP/2 or later is a malformed HTTP/1.1 request: 400."""
        status = 400 if code == 505 else code
        short = self.responses.get(code, ("Bad request",))[0]
        self._reply(*sqs_error(status, message or short), close=True)


def _is_page(headers: Mapping[str, Any]) -> bool:
    """True for an HTML answer (the web console's pages, its errors included): a browser
    shows it as it is, so it is not reshaped into an SQS error."""
    return any(k.lower() == "content-type" and str(v).startswith("text/html")
               for k, v in headers.items())


class _Server(HTTPServer):
    allow_reuse_address = True
    request_queue_size = 1024
    tls: ssl.SSLContext | None = None
    pool: ConnectionPool

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the accepted connection to the pool, which gives it a thread when it has
        a request to serve (never the accepting thread)."""
        self.pool.offer(request, client_address)

    def serve_connection(self, connection: PooledConnection) -> bool | parking.Continuation:
        """Serve what the connection sends now; True when it stays open, idle (a parked
        long poll's continuation when it parks)."""
        if connection.state is None:
            handler: Any = self.RequestHandlerClass
            connection.state = handler(connection.sock, connection.address, self)
        answer: bool | parking.Continuation = connection.state.serve_ready()
        return answer

    @staticmethod
    def close_connection(connection: PooledConnection) -> None:
        """Close a connection the pool is done with."""
        if connection.state is not None:
            connection.state.close()
        else:
            connection.sock.close()

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept a connection; over TLS, wrap it (the handshake waits for its thread)."""
        sock, address = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address


class LocalServer:
    """Serves a Chalice app at host:port until stopped."""

    def __init__(self, app: Chalice, host: str = "127.0.0.1", port: int = 9324,
                 routes: dict[str, Route] | None = None,
                 limits: HttpLimits | None = None, tls: ssl.SSLContext | None = None,
                 listener: socket.socket | None = None,
                 trusted_proxies: tuple[str, ...] = (), gate: Gate | None = None) -> None:
        serve_from_threads(app)  # each thread reads its own request, not the last one's
        http_headers.install()  # headers without the email parser (http_headers.py)
        handler = type("Handler", (_Handler,), {
            "gateway": ConnectionGateway(app, Config()),
            "matcher": RouteMatcher(list(app.routes)),
            "routes": dict(routes or {}), "limits": limits or HttpLimits(),
            "https": tls is not None, "trusted_proxies": tuple(trusted_proxies),
            "gate": staticmethod(gate) if gate is not None else None})
        if listener is None:
            self._server = _Server((host, port), handler)
        else:  # bound and listening already (dmqlocal/preflight.py)
            self._server = _Server(listener.getsockname()[:2], handler, bind_and_activate=False)
            self._server.socket.close()
            self._server.socket = listener
            self._server.server_address = listener.getsockname()[:2]
        self._server.tls = tls
        limits = limits or HttpLimits()
        self._server.pool = ConnectionPool(
            self._server.serve_connection, self._server.close_connection, refuse,
            fd_room(limits.max_connections), limits.idle_timeout_s)
        self._thread: threading.Thread | None = None

    def connections(self) -> tuple[int, int, int]:
        """(open, idle, at work) connections right now."""
        return self._server.pool.counts()

    def parked(self) -> int:
        """Connections whose long poll waits, parked, without a thread."""
        return self._server.pool.parked()

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint URL."""
        host = self._server.server_address[0]
        scheme = "https" if self._server.tls is not None else "http"
        return f"{scheme}://{host if isinstance(host, str) else host.decode()}:{self.port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._server.pool.start()
        self._thread = threading.Thread(target=self._server.serve_forever, name="dmq-http",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._server.pool.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
