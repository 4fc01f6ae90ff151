"""Where mnemo may send a request of its own: only to public addresses, unless the operator allows more.

A tenant's webhook URL is a request mnemo makes on the tenant's behalf from inside the operator's network;
left open, it is a blind SSRF (loopback, the LAN, a cloud metadata endpoint). The URL is judged by the
addresses its host resolves to — resolved the way the HTTP client would (``getaddrinfo``, which also reads
``2130706433``, ``0x7f.1``, ``127.1`` and IDNA look-alikes) — at set time and again before each delivery,
and the delivery connects to the very address that was checked (:class:`Target`), so a name that
resolves to a public address when set and to a private one later (DNS rebinding) is refused then.

Every address must be public: :func:`public` is ``ipaddress``' ``is_global`` plus explicit refusals that
``is_global`` lets through (multicast, IPv4 addresses inside IPv4-mapped, 6to4, Teredo and NAT64 IPv6 ones).
The operator's allow-list (``MNEMO_WEBHOOK_ALLOWED_HOSTS``) names host names, addresses or networks that
may be reached anyway (an internal receiver, a test's loopback stand-in).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from memory.errors import InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NOT_PUBLIC: tuple[Network, ...] = tuple(ipaddress.ip_network(n) for n in (
    # IANA's special-purpose registries, written out so that the answer does not depend on the Python release
    # (3.11's is_global calls most of 192.0.0.0/24 global, and multicast global).
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "224.0.0.0/4", "240.0.0.0/4",
    "::/127", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "fc00::/7", "fe80::/10", "fec0::/10",
    "ff00::/8",
))
_DEFAULT_PORTS = {"http": 80, "https": 443}


class WebhookUrlInvalid(InvalidInput):
    code = "invalid_webhook_url"


class AddressNotPublic(InvalidInput):
    code = "webhook_address_not_public"


class HostUnresolvable(InvalidInput):
    code = "webhook_host_unresolvable"


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to (mapped, 6to4, Teredo's server-side client, NAT64)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def public(address: Address) -> bool:
    """Whether ``address`` is on the public internet: no loopback, private, link-local, shared (100.64/10),
    "this network" (0/8), reserved, multicast or documentation address, nor an IPv6 one carrying such."""
    if any(address.version == network.version and address in network for network in _NOT_PUBLIC):
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            return False
        inner = _embedded_v4(address)
        if inner is not None and not public(inner):
            return False
    return address.is_global and not (
        address.is_multicast or address.is_reserved or address.is_unspecified or address.is_loopback
        or address.is_link_local or address.is_private
    )


def _host_key(host: str) -> str:
    return host.lower().rstrip(".")


@dataclass(frozen=True)
class AllowList:
    """What the operator lets webhooks reach although it is not public: host names, addresses, networks."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> AllowList:
        """``MNEMO_WEBHOOK_ALLOWED_HOSTS``: comma-separated host names, IP addresses or CIDR networks
        (``ValueError`` naming a malformed entry: the process refuses to start)."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            labels = _host_key(item).split(".")
            if not all(label and len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
                       for label in labels):
                raise ValueError(f"MNEMO_WEBHOOK_ALLOWED_HOSTS: {item!r} is neither a host name nor an address/CIDR")
            hosts.add(_host_key(item))
        return cls(frozenset(hosts), tuple(networks))

    def names(self, host: str) -> bool:
        return _host_key(host) in self.hosts

    def covers(self, address: Address) -> bool:
        return any(address.version == network.version and address in network for network in self.networks)


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, as the HTTP client's own connect would find them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Target:
    """A checked URL: its host, port and the checked addresses a request may connect to (in resolver order)."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[Address, ...]

    def pinned_url(self, address: Address) -> str:
        """The URL with its host replaced by a checked address (the request goes there, nowhere else)."""
        assert address in self.addresses
        parts = urlsplit(self.url)
        shown = str(address).replace("%", "%25")  # an IPv6 zone, as a URL spells it
        literal = f"[{shown}]" if address.version == 6 else shown
        return urlunsplit((parts.scheme, f"{literal}:{self.port}", parts.path, parts.query, ""))

    def host_header(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port == _DEFAULT_PORTS[self.scheme] else f"{shown}:{self.port}"


def checked_target(url: str, allowed: AllowList, resolve: Resolver = system_resolver) -> Target:
    """``url`` judged as a webhook: an absolute http(s) URL without credentials whose host resolves only to
    public addresses (or that the allow-list names). Each refusal is a typed 422 naming its reason."""
    try:
        parts = urlsplit(url)
        port = parts.port  # reading it checks it
    except ValueError:
        raise WebhookUrlInvalid("the webhook url must be an absolute http or https URL") from None
    host = unquote(parts.hostname or "")  # "%6c%6fcalhost" and a zone's "%25" as a client would read them
    if parts.scheme not in _DEFAULT_PORTS or not host or port == 0 or url != url.strip():
        raise WebhookUrlInvalid("the webhook url must be an absolute http or https URL")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise WebhookUrlInvalid("the webhook url must not carry credentials: the secret signs each message")
    port = port or _DEFAULT_PORTS[parts.scheme]
    try:  # "localhost." is "localhost": the root's dot changes no answer, but some resolvers miss it
        found = [ipaddress.ip_address(address) for address in resolve(host.rstrip(".") or host, port)]
    except (OSError, UnicodeError, ValueError):
        found = []
    if not found:
        raise HostUnresolvable(f"the webhook's host {host!r} does not resolve to any address", details={"host": host})
    refused = [a for a in found if not public(a) and not allowed.covers(a)]
    if refused and not allowed.names(host):
        raise AddressNotPublic(
            f"the webhook's host {host!r} resolves to {refused[0]}, which is not a public address; an operator can"
            " allow it with MNEMO_WEBHOOK_ALLOWED_HOSTS",
            details={"host": host, "address": str(refused[0])},
        )
    return Target(url, parts.scheme, host, port, tuple(dict.fromkeys(found)))
