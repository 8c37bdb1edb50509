"""One POST to a push endpoint, to an address checked first (docs/push.md, "Destinations").

The endpoint's host is resolved once; every address it resolves to must pass the
destination policy (`push.destinations`), and the connection goes to that checked
address, never to a second lookup of the name, so a name that changes its answer between
the check and the connect (DNS rebinding) reaches nothing new. Over TLS the certificate
is still verified for the host name, which is also what SNI and the Host header carry.
A redirect is never followed: a 3xx answer fails the batch like any other non-2xx one.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from chalicelib.push.destinations import DestinationPolicy

# The largest answer read from an endpoint (a batchItemFailures list of 10,000 ids fits).
MAX_RESPONSE_BYTES = 2 * 1024 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}


class DestinationRefusedError(Exception):
    """The endpoint resolves to an address push delivery may not connect to."""


@dataclass(frozen=True)
class Answer:
    """An endpoint's answer: its status and (for a 2xx) its body."""

    status: int
    body: bytes


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order (an IP literal: itself)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def checked_addresses(host: str, port: int, policy: DestinationPolicy) -> list[str]:
    """The addresses of `host`, each allowed by the policy; DestinationRefusedError names
    the first that is not (one bad address refuses the name), OSError when it does not
    resolve."""
    addresses = resolve(host, port)
    for address in addresses:
        why = policy.refusal(address)
        if why is not None:
            shown = why if address == host else f"{host} resolves to {why}"
            raise DestinationRefusedError(shown)
    return addresses


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to a fixed address; the Host header still names the endpoint's host."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPS(_PinnedHTTP):
    """HTTPS to a fixed address, verified (and SNI sent) for the endpoint's host name."""

    default_port = 443

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, address, timeout)
        self._tls = ssl.create_default_context()

    def connect(self) -> None:
        super().connect()
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self.host)


def post(url: str, data: bytes, timeout_s: float, policy: DestinationPolicy) -> Answer:
    """POST `data` (JSON) to the endpoint at a checked address. Raises
    DestinationRefusedError, OSError (no answer) or ValueError (a bad URL)."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an http or https URL with a host: {url!r}")
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    last: OSError | None = None
    for address in checked_addresses(parts.hostname, port, policy):
        connection = kind(parts.hostname, port, address, timeout_s)
        try:
            return _exchange(connection, parts.path or "/", parts.query, data)
        except ConnectionRefusedError as exc:
            last = exc  # the next address of the name, as a browser would try it
        finally:
            connection.close()
    raise last or OSError(f"{parts.hostname} has no address")


def _exchange(connection: http.client.HTTPConnection, path: str, query: str,
              data: bytes) -> Answer:
    target = f"{path}?{query}" if query else path
    connection.request("POST", target, body=data, headers={
        "Content-Type": "application/json", "User-Agent": "dmq-push"})
    response = connection.getresponse()
    body = response.read(MAX_RESPONSE_BYTES) if 200 <= response.status < 300 else b""
    return Answer(response.status, body)
