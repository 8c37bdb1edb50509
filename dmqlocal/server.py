"""A threaded HTTP server for the Chalice app, with TCP_NODELAY on every connection."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chalice import Chalice
from chalice.config import Config
from chalice.local import LocalGateway, LocalGatewayException

logger = logging.getLogger("dmq.local")
# A local-only GET path answered beside the app: () -> (status, headers, body).
Route = Callable[[], tuple[int, dict[str, str], Any]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gateway: LocalGateway
    routes: dict[str, Route] = {}

    def setup(self) -> None:
        super().setup()
        # Without this, keep-alive requests stall ~40 ms on delayed ACKs.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the request log quiet; errors still reach the logger."""

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        route = self.routes.get(self.path) if self.command == "GET" else None
        try:
            if route is not None:
                status, out_headers, payload = route()
            else:
                response = self.gateway.handle_request(self.command, self.path, headers, body)
                status, out_headers, payload = (
                    response["statusCode"], response.get("headers", {}), response.get("body")
                )
        except LocalGatewayException as exc:
            status, out_headers, payload = exc.CODE, exc.headers, exc.body
        data = payload if isinstance(payload, bytes) else (payload or "").encode("utf-8")
        self.send_response(status)
        for key, value in out_headers.items():
            if key.lower() != "content-length":
                self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class LocalServer:
    """Serves a Chalice app at host:port until stopped."""

    def __init__(self, app: Chalice, host: str = "127.0.0.1", port: int = 9324,
                 routes: dict[str, Route] | None = None) -> None:
        handler = type("Handler", (_Handler,), {"gateway": LocalGateway(app, Config()),
                                                "routes": dict(routes or {})})
        self._server = _Server((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The endpoint URL."""
        host = self._server.server_address[0]
        return f"http://{host if isinstance(host, str) else host.decode()}:{self.port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="dmq-http",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
