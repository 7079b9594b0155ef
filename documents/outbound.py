"""Outbound HTTP to addresses users give (webhook endpoints, web sources): the SSRF rules.

A URL's host is resolved (in a few threads of each process, with a deadline) and every address it
resolves to must be allowed: on the public internet (an IPv6 address that carries an IPv4 one
judged by that one), or in a network the caller allows. The caller then connects to the very
address that was checked (``pinned``), so a DNS answer that changes between the check and the
connection (rebinding) cannot reach a private network. Webhook delivery
(``documents/webhooks/delivery.py``) and web sources (``documents/sources/webfetch.py``) both
use these rules, each with its own operator switch.
"""

from __future__ import annotations

import concurrent.futures
import functools
import ipaddress
import os
import socket
import ssl
from collections.abc import Callable
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
from django.utils.translation import gettext_noop

# Host names are resolved in a few threads of each process, so a resolver that never answers costs
# a request (or a delivery) its resolve timeout at most; a lookup still hung when its time is up
# keeps its thread, and once every thread is hung new lookups wait in line and time out too.
_resolvers: dict[int, concurrent.futures.ThreadPoolExecutor] = {}


def _resolver_pool() -> concurrent.futures.ThreadPoolExecutor:
    # One per process: a pool inherited through fork has threads that no longer exist.
    pid = os.getpid()
    if pid not in _resolvers:
        _resolvers.clear()
        _resolvers[pid] = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix="outbound-dns"
        )
    return _resolvers[pid]


class TargetRefused(Exception):
    """A URL we will not send to; ``reason`` is safe to show to its owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# NAT64 with the well-known prefix (the IPv4 address is the last 32 bits), and IPv4-compatible
# addresses (deprecated, ``::a.b.c.d``): judged by the IPv4 address they carry.
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# Refused outright: local-use NAT64 (where the IPv4 address sits depends on the operator's prefix
# length) and Teredo (a tunnel to whatever its obfuscated client address is).
_REFUSED_V6 = (ipaddress.ip_network("64:ff9b:1::/48"), ipaddress.ip_network("2001::/32"))

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _carried(address: str) -> Address | None:
    """The address to judge ``address`` by (the IPv4 one an IPv6 address carries), or None for
    one refused outright."""
    ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _REFUSED_V6):
            return None
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64_WELL_KNOWN or (ip in _IPV4_COMPATIBLE and int(ip) > 0xFFFF):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def networks_of(entries: object) -> tuple[Network, ...]:
    """The networks an operator's setting lists (an entry that is not a network allows nothing)."""
    found: list[Network] = []
    for text in entries if isinstance(entries, list | tuple) else ():
        try:
            found.append(ipaddress.ip_network(str(text).strip(), strict=False))
        except ValueError:
            continue
    return tuple(found)


def is_public(address: str) -> bool:
    """Whether ``address`` is on the public internet, judging an IPv6 address that carries an IPv4
    one (mapped, IPv4-compatible, NAT64, 6to4) by that IPv4 address."""
    ip = _carried(address)
    return ip is not None and ip.is_global and not ip.is_multicast


def in_networks(address: str, networks: tuple[Network, ...]) -> bool:
    """Whether ``address`` (or the IPv4 address it carries) lies in one of ``networks``."""
    ip = _carried(address)
    return ip is not None and any(ip.version == net.version and ip in net for net in networks)


def resolve(host: str, port: int, timeout: float) -> list[str]:
    """The addresses of ``host`` (without duplicates), or :class:`TargetRefused` when it does not
    resolve within ``timeout`` seconds."""
    lookup = _resolver_pool().submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        found = lookup.result(timeout=max(timeout, 0.0))
    except concurrent.futures.TimeoutError:
        lookup.cancel()
        raise TargetRefused(gettext_noop("The URL's host did not resolve in time.")) from None
    except (OSError, ValueError, UnicodeError):
        raise TargetRefused(gettext_noop("The URL's host could not be resolved.")) from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def port_of(parts: SplitResult) -> int:
    """The URL's port (the scheme's default when none is given); ValueError when it is not one."""
    return parts.port or (443 if parts.scheme == "https" else 80)


def check_url(url: str, timeout: float, allowed: Callable[[str], bool]) -> list[str]:
    """The addresses ``url`` resolves to, every one ``allowed``; :class:`TargetRefused` otherwise
    (a URL that is not http(s) with a host, carries a user name or password, does not resolve
    within ``timeout`` seconds, or leads to an address not allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetRefused(gettext_noop("The URL must start with http:// or https:// and name a host."))
    if parts.username or parts.password:
        raise TargetRefused(gettext_noop("The URL must not contain a user name or password."))
    try:
        port = port_of(parts)
    except ValueError:
        raise TargetRefused(gettext_noop("The URL's host could not be resolved.")) from None
    addresses = resolve(parts.hostname, port, timeout)
    if not all(allowed(a) for a in addresses):
        raise TargetRefused(
            gettext_noop("The URL points to a private, loopback or link-local address, which is not allowed.")
        )
    return addresses


def pinned(url: str, address: str) -> str:
    """``url`` with its host replaced by the checked ``address`` (the caller sends the ``Host``
    header and the TLS name of the original)."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS settings of every outbound request: httpx's own default (certifi's CA bundle, no
    environment), built once per process. A client given none builds it again, CA bundle and all,
    which costs more CPU than a small request (about 25 ms; a crawl makes one per page). A context
    serves any number of connections, in any thread."""
    return httpx.create_ssl_context(trust_env=False)
