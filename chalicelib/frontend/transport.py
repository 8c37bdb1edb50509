"""What a request's connection really is: over TLS or not, and the client's address.

A client can send any header, so `X-Forwarded-Proto`, `X-Forwarded-For` and `Forwarded`
are believed only when the peer that sent them is a configured proxy
(`DMQ_TRUSTED_PROXIES`: addresses or CIDRs, none by default). The connection's own facts
come from who made the request event, never from a header:

- the local server puts them in the event's request context (`LOCAL_MARK`, and the
  peer's address as `identity.sourceIp`, as API Gateway does): `dmqlocal/connection.py`;
- behind API Gateway (on Lambda) the gateway sets `X-Forwarded-Proto` itself, and
  `identity.sourceIp` is the address that connected to it;
- anything else (`chalice local`, the test client) is plain HTTP from `sourceIp`.

What this decides: `aws:SecureTransport` in queue policies, the scheme of the queue URLs
DMQ returns (and their host: a trusted proxy's `X-Forwarded-Host` or `Forwarded: host=`
names the one the client used), the console's own origin, and the client address its
sign-in limits count.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

LOCAL_MARK = "dmqConnection"  # {"secure": bool}, set by the local server only
FORWARDED_HEADERS = frozenset({"x-forwarded-proto", "x-forwarded-for", "x-forwarded-host",
                               "x-forwarded-port", "forwarded"})
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Transport:
    """How the client reached DMQ."""

    secure: bool
    client: str = ""  # the client's address ("" when nothing says)
    host: str = ""  # the host (and port) the client used, as a trusted proxy says ("": Host)

    @property
    def scheme(self) -> str:
        """https or http."""
        return "https" if self.secure else "http"


@lru_cache(maxsize=8)
def networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    """Parsed proxy addresses and CIDRs; ValueError names an entry that is neither."""
    found = []
    for entry in entries:
        try:
            found.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"DMQ_TRUSTED_PROXIES: {entry!r} is not an address or a CIDR") \
                from exc
    return tuple(found)


def is_trusted(address: str, proxies: Iterable[Network]) -> bool:
    """True when the address is one of the proxies."""
    try:
        parsed = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return any(parsed.version == net.version and parsed in net for net in proxies)


def transport_of(headers: Mapping[str, str], context: Mapping[str, Any], on_gateway: bool,
                 proxies: tuple[str, ...]) -> Transport:
    """The request's transport (headers with lower-case names; `context` is the event's
    requestContext)."""
    identity = context.get("identity")
    peer = str(identity.get("sourceIp") or "") if isinstance(identity, Mapping) else ""
    mark = context.get(LOCAL_MARK)
    if isinstance(mark, Mapping):
        connection = Transport(mark.get("secure") is True, peer)
    elif on_gateway:  # API Gateway states the scheme itself, and only serves HTTPS
        return Transport(_last(headers.get("x-forwarded-proto", "")) == "https", peer)
    else:
        connection = Transport(False, peer)
    trusted = networks(proxies)
    if not is_trusted(peer, trusted):
        return connection
    proto = _forwarded_proto(headers)
    return Transport(connection.secure if proto is None else proto == "https",
                     _client(headers, peer, trusted), _forwarded_host(headers))


def _last(value: str) -> str:
    """The right-most item of a comma list, lower case (what the nearest proxy added)."""
    return value.rsplit(",", 1)[-1].strip().lower()


def _forwarded_pairs(value: str) -> list[dict[str, str]]:
    """The elements of an RFC 7239 `Forwarded` header, nearest proxy last."""
    elements = []
    for element in value.split(","):
        pairs = {}
        for pair in element.split(";"):
            key, _, found = pair.partition("=")
            if key.strip():
                pairs[key.strip().lower()] = found.strip().strip('"')
        elements.append(pairs)
    return elements


def _forwarded_proto(headers: Mapping[str, str]) -> str | None:
    """The scheme the nearest trusted proxy reports, if it reports one."""
    forwarded = headers.get("forwarded", "")
    if forwarded:
        protos = [e["proto"].lower() for e in _forwarded_pairs(forwarded) if e.get("proto")]
        return protos[-1] if protos else None
    proto = _last(headers.get("x-forwarded-proto", ""))
    return proto or None


def _forwarded_host(headers: Mapping[str, str]) -> str:
    """The host the client used, as the nearest trusted proxy reports it ("": none)."""
    forwarded = headers.get("forwarded", "")
    if forwarded:
        hosts = [e["host"] for e in _forwarded_pairs(forwarded) if e.get("host")]
        return hosts[-1] if hosts else ""
    return headers.get("x-forwarded-host", "").rsplit(",", 1)[-1].strip()


def _client(headers: Mapping[str, str], peer: str, trusted: tuple[Network, ...]) -> str:
    """The right-most address of the forwarding chain that is not a trusted proxy."""
    forwarded = headers.get("forwarded", "")
    if forwarded:
        chain = [_host_of(e.get("for", "")) for e in _forwarded_pairs(forwarded)]
    else:
        chain = [a.strip() for a in headers.get("x-forwarded-for", "").split(",")]
    address = peer
    for hop in reversed([a for a in chain if a]):
        if not is_trusted(address, trusted):
            break
        address = hop
    return address


def _host_of(node: str) -> str:
    """The address of a `Forwarded` node (`1.2.3.4:80`, `[2001:db8::1]:80`, `unknown`)."""
    if node.startswith("["):
        return node[1:].split("]", 1)[0]
    return node.split(":", 1)[0] if node.count(":") == 1 else node
