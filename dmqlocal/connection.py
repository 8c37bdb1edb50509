"""What the local server knows of each connection, handed to the app as trusted facts.

The server knows whether a connection is TLS and which address it comes from. It puts
both into the request event's context, where API Gateway puts its own and where a client
cannot write (`chalicelib/frontend/transport.py` reads them). Forwarded headers a client
sent are dropped before the app sees them, unless the peer is a trusted proxy
(`DMQ_TRUSTED_PROXIES`); over TLS the server says so with `X-Forwarded-Proto: https`, as
API Gateway does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalice import Chalice
from chalice.config import Config
from chalice.local import LambdaContext, LocalGateway

from chalicelib.domain.unique_ids import random_uuid
from chalicelib.frontend.transport import FORWARDED_HEADERS, LOCAL_MARK, is_trusted, networks


@dataclass(frozen=True)
class Connection:
    """One client connection: its peer's address and whether it is TLS."""

    peer: str
    secure: bool


def trusted_headers(headers: Mapping[str, str], connection: Connection,
                    proxies: tuple[str, ...]) -> dict[str, str]:
    """The request's headers (lower-case names) as the app may see them."""
    if is_trusted(connection.peer, networks(proxies)):
        return dict(headers)
    kept = {k: v for k, v in headers.items() if k not in FORWARDED_HEADERS}
    if connection.secure:
        kept["x-forwarded-proto"] = "https"
    return kept


class _Context(LambdaContext):
    """Chalice's local Lambda context with the same fields, made from settings read once
    and with a request id that costs no system call (`unique_ids`): chalice's own reads
    its chained configuration and the OS's random source for every request."""

    def __init__(self, function_name: Any, memory_size: Any, max_runtime_ms: int) -> None:
        self._time_source = _WALL_CLOCK
        self._start_time = time.time() * 1000
        self._max_runtime = max_runtime_ms
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = ""
        self.memory_limit_in_mb = memory_size
        self.aws_request_id = random_uuid()
        self.log_group_name = ""
        self.log_stream_name = ""
        self.identity = None
        self.client_context = None


class _WallClock:
    def time(self) -> float:
        return time.time()


_WALL_CLOCK: Any = _WallClock()


class ConnectionGateway(LocalGateway):
    """Chalice's local gateway, whose events carry the connection's facts."""

    def __init__(self, app: Chalice, config: Config) -> None:
        super().__init__(app, config)
        self._serving = threading.local()
        timeout_s = (config.lambda_timeout if config.lambda_timeout is not None
                     else self.MAX_LAMBDA_EXECUTION_TIME)
        self._context: tuple[Any, Any, int] = (  # None where the config names none
            config.function_name, config.lambda_memory_size, int(timeout_s * 1000))

    def _generate_lambda_context(self) -> LambdaContext:
        return _Context(*self._context)

    def serve(self, connection: Connection, method: str, path: str,
              headers: dict[str, str], body: bytes) -> Any:
        """`handle_request` for a request that came over `connection`."""
        self._serving.connection = connection
        try:
            return self.handle_request(method, path, headers, body)
        finally:
            self._serving.connection = None
            # The request is not kept with its thread (a parked long poll's thread sleeps
            # on: the next serving sets it again).
            self._app_object.current_request = None

    def _generate_lambda_event(self, method: str, path: str, headers: Any,
                               body: bytes | None) -> Any:
        event = super()._generate_lambda_event(method, path, headers, body)
        connection = getattr(self._serving, "connection", None)
        if connection is not None:
            context = event["requestContext"]
            context["identity"]["sourceIp"] = connection.peer
            context[LOCAL_MARK] = {"secure": connection.secure}
        return event
