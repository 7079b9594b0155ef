"""One request of a web source (docs/sources.md, "Web sites"): SSRF-safe, bounded, same site only.

Every request and every redirect hop is checked by the rules of ``documents/outbound.py`` (the
host's addresses resolved with a deadline, each one public or in ``SOURCES_WEB_ALLOWED_NETWORKS``)
and goes to the very address that was checked, with the URL's own ``Host`` header and TLS name. A
redirect is followed only within the site (same scheme, host and port), at most
:data:`MAX_REDIRECTS` hops; a redirect anywhere else is refused before any connection to it, so
the site's credentials (headers sent to its origin only) never leave it. One deadline covers the
whole request, hops included (resolving, connecting, TLS, the answer's headers and body): a server
that never answers or trickles its answer is cut off there. At most ``max_bytes + 1`` bytes of a
body are read.

Refusals are :class:`~documents.sources.connectors.Refused` with a stable code and user-safe words
that name no address and no secret.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import anyio
import httpx
from django.conf import settings
from django.utils.translation import gettext_noop

from documents.outbound import (
    Network,
    TargetRefused,
    check_url,
    in_networks,
    is_public,
    networks_of,
    pinned,
    tls_context,
)
from documents.sources.connectors import Refused

USER_AGENT = "document-platform-sources/1"
MAX_REDIRECTS = 5
_ACCEPT = "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.1"

Origin = tuple[str, str, int]


def canonical(url: str, base: str = "") -> str | None:
    """``url`` (relative to ``base``) as one spelling: scheme and host lower case, default port
    and fragment dropped, dot segments resolved, unsafe characters percent-encoded; None for
    anything but an http(s) URL with a host and no user name."""
    try:
        parts = urlsplit(urljoin(base, url.strip()) if base else url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in ("http", "https") or not host or parts.username or parts.password:
        return None
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return None
    if ":" in host:
        host = f"[{host}]"
    default = 443 if scheme == "https" else 80
    netloc = host if port in (None, default) else f"{host}:{port}"
    # Joining onto the site's root resolves "." and ".." segments the way a browser does.
    path = urlsplit(urljoin(f"{scheme}://{netloc}/", parts.path or "/")).path or "/"
    path = quote(path, safe="/%:@!$&'()*+,;=-._~")
    query = quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return urlunsplit((scheme, netloc, path, query, ""))


def origin_of(url: str) -> Origin:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def allowed_networks() -> tuple[Network, ...]:
    """The operator's ``SOURCES_WEB_ALLOWED_NETWORKS`` (an entry that is not a network allows nothing)."""
    return networks_of(settings.SOURCES_WEB_ALLOWED_NETWORKS)


@dataclass(frozen=True)
class Site:
    """Where a source's pages may come from, and the headers its credentials make (sent to this
    origin only)."""

    origin: Origin
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    networks: tuple[Network, ...] = ()

    def allowed(self, address: str) -> bool:
        return is_public(address) or in_networks(address, self.networks)

    def holds(self, url: str) -> bool:
        return origin_of(url) == self.origin

    def check(self, url: str, timeout: float) -> list[str]:
        """``url``'s checked addresses; :class:`Refused` (``address_not_allowed``) otherwise."""
        try:
            return check_url(url, min(timeout, settings.SOURCES_WEB_TIMEOUT), self.allowed)
        except TargetRefused as refused:
            raise Refused("address_not_allowed", refused.reason) from None


@dataclass(frozen=True)
class Answer:
    """A page's answer: its URL after the site's own redirects, status, headers and (if asked
    for) its body, at most ``max_bytes + 1`` bytes of it (``too_large`` then)."""

    url: str
    status: int
    headers: httpx.Headers
    body: bytes | None
    too_large: bool
    location: str = ""
    # The body as sent with ``Content-Encoding: gzip`` (asked for with ``gzip=True`` only): still
    # compressed, at most ``max_bytes + 1`` bytes of it.
    gzipped: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


WantsBody = Callable[[int, httpx.Headers], bool]


def always(status: int, headers: httpx.Headers) -> bool:
    return 200 <= status < 300


def never(status: int, headers: httpx.Headers) -> bool:
    return False


@functools.cache
def _tls() -> ssl.SSLContext:
    # Loading the CA bundle costs more than a page of a site on the same network: once a process.
    return httpx.create_ssl_context()


def get(
    url: str,
    site: Site,
    *,
    wants_body: WantsBody = always,
    max_bytes: int,
    follow: bool = True,
    deadline: float | None = None,
    conditional: dict[str, str] | None = None,
    gzip: bool = False,
) -> Answer:
    """GET ``url`` of ``site`` within ``SOURCES_WEB_TIMEOUT`` seconds (or by ``deadline``, a
    ``time.monotonic()`` value, if sooner), following the site's own redirects if ``follow``.
    The body is read when ``wants_body(status, headers)`` says so. ``conditional`` headers
    (``If-None-Match``, ``If-Modified-Since``) go with the first hop only: they describe ``url``,
    not a page it redirects to. ``gzip``: the site may answer with ``Content-Encoding: gzip``
    (the body is kept compressed, :attr:`Answer.gzipped`). Raises :class:`Refused`."""
    limit = time.monotonic() + settings.SOURCES_WEB_TIMEOUT
    deadline = limit if deadline is None else min(deadline, limit)
    for hop in range(MAX_REDIRECTS + 1):
        if not site.holds(url):
            raise Refused(
                "redirect_off_site",
                gettext_noop("The page redirects to another site, which is not followed."),
            )
        address = site.check(url, deadline - time.monotonic())[0]
        parts = urlsplit(url)
        headers = {
            "user-agent": USER_AGENT,
            "accept": _ACCEPT,
            "accept-encoding": "gzip, identity" if gzip else "identity",
            "host": parts.netloc,
        }
        if site.holds(url):  # the credentials go to the site's own origin and nowhere else
            headers.update(site.headers)
        if conditional and hop == 0:
            headers.update(conditional)
        try:
            status, answered, body, too_large = anyio.run(
                _exchange,
                pinned(url, address),
                headers,
                parts.hostname or "",
                deadline,
                max_bytes,
                wants_body,
                gzip,
            )
        except (TimeoutError, httpx.TimeoutException):
            raise Refused("page_timeout", gettext_noop("The site did not answer in time.")) from None
        except httpx.HTTPError:
            raise Refused("page_unreachable", gettext_noop("The site could not be reached.")) from None
        location = answered.get("location", "") if 300 <= status < 400 else ""
        if location and follow:
            target = canonical(location, url)
            if target is None:
                raise Refused(
                    "redirect_off_site",
                    gettext_noop("The page redirects to another site, which is not followed."),
                )
            url = target
            continue
        encoding = answered.get("content-encoding", "").strip().lower()
        return Answer(url, status, answered, body, too_large, location, gzipped=encoding == "gzip")
    raise Refused("too_many_redirects", gettext_noop("The page redirects too many times."))


async def _exchange(
    target: str,
    headers: dict[str, str],
    host: str,
    deadline: float,
    max_bytes: int,
    wants_body: WantsBody,
    gzip: bool,
) -> tuple[int, httpx.Headers, bytes | None, bool]:
    """One request to the checked address, cancelled at ``deadline`` wherever it is (httpx's own
    timeouts bound each read, not the whole)."""
    remaining = max(deadline - time.monotonic(), 0.0)
    with anyio.fail_after(remaining):
        async with (
            httpx.AsyncClient(
                timeout=httpx.Timeout(remaining),
                follow_redirects=False,
                trust_env=False,
                verify=tls_context(),
            ) as client,
            client.stream("GET", target, headers=headers, extensions={"sni_hostname": host}) as response,
        ):
            status, answered = response.status_code, response.headers
            declared = answered.get("content-length", "")
            too_large = declared.isdigit() and int(declared) > max_bytes
            if too_large or not wants_body(status, answered):
                return status, answered, None, too_large
            readable = ("", "identity", "gzip") if gzip else ("", "identity")
            if answered.get("content-encoding", "identity").strip().lower() not in readable:
                raise Refused(
                    "unsupported_encoding",
                    gettext_noop("The site sent the page in an encoding that is not read."),
                )
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > max_bytes:
                    return status, answered, bytes(body[: max_bytes + 1]), True
            return status, answered, bytes(body), False
