"""Where push delivery may connect: public addresses, plus the networks an operator allows.

A push endpoint is a URL a tenant gives, and DMQ connects to it from inside the
deployment. Left open, that reaches what only the deployment should reach: its own port,
the store's, the cloud's instance metadata (169.254.169.254, fd00:ec2::254), a private
network. So an address is refused unless it is global (not loopback, link-local, private,
shared, reserved, documentation, unspecified or multicast, as Python's `ipaddress` and
the IANA special-purpose registries class them), or lies in a network the operator allows
(DMQ_PUSH_ALLOWED_NETWORKS). An IPv6 address that embeds an IPv4 one (mapped, 6to4,
Teredo) is judged by the IPv4 address it reaches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(texts: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) as networks; ValueError names the first bad one."""
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"{text!r} is not an IP network (a CIDR such as "
                             "10.0.0.0/8 or ::1/128)") from exc
    return tuple(networks)


def reached(address: Address) -> Address:
    """The address a connection really reaches: the IPv4 address inside an IPv4-mapped,
    6to4 or Teredo IPv6 address, else the address itself."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and address.teredo is not None:
            inner = address.teredo[1]
        if inner is not None:
            return inner
    return address


def kind_of(address: Address) -> str | None:
    """Why an address is not public ("loopback", "link-local", ...), or None if it is."""
    checks = (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
              ("link-local", address.is_link_local), ("multicast", address.is_multicast),
              ("private", address.is_private), ("reserved", address.is_reserved))
    for name, hit in checks:
        if hit:
            return name
    return None if address.is_global else "non-public"


@dataclass(frozen=True)
class DestinationPolicy:
    """Which addresses push delivery may connect to."""

    allowed: tuple[Network, ...] = ()

    @classmethod
    def of(cls, texts: Iterable[str]) -> DestinationPolicy:
        """The policy of DMQ_PUSH_ALLOWED_NETWORKS' CIDRs."""
        return cls(parse_networks(texts))

    def refusal(self, text: str) -> str | None:
        """None when the address may be connected to; else why not, in a few words."""
        try:
            address = ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone
        except ValueError:
            return f"{text!r} is not an IP address"
        target = reached(address)
        if any(a.version == net.version and a in net
               for a in (address, target) for net in self.allowed):
            return None
        kind = kind_of(target)
        if kind is None:
            return None
        shown = str(address) if target == address else f"{address} ({target})"
        return (f"{shown} is a {kind} address; push endpoints must be public unless "
                "DMQ_PUSH_ALLOWED_NETWORKS allows its network")
