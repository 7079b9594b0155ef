"""What a web site asks of the crawler, and what the crawler remembers of a page (docs/sources.md,
"Web sites"): robots.txt (rules, ``Crawl-delay`` and ``Sitemap:`` lines), the robots directives
of a page (``X-Robots-Tag`` and ``<meta name="robots">``), the conditional headers a page's
marker makes, and a gzipped sitemap unpacked within the page size limit.

Pure rules and parsing; the requests are ``documents/sources/webfetch.py``'s.
"""

from __future__ import annotations

import re
import urllib.robotparser
import zlib
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.translation import gettext_noop
from selectolax.lexbor import LexborHTMLParser

from documents.sources.connectors import Refused
from documents.sources.webfetch import USER_AGENT, Site, canonical, get

if TYPE_CHECKING:
    import httpx

ROBOTS_MAX_BYTES = 512 * 1024
# The product token robots rules may name us by ("User-agent:", "X-Robots-Tag: <agent>: ...").
AGENT = USER_AGENT.split("/", 1)[0].lower()
NOINDEX, NOFOLLOW = "noindex", "nofollow"
# X-Robots-Tag directives that carry a value after a colon (not an agent name before one).
_VALUED = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})
_AGENT_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*:\s*(.*)$", re.DOTALL)
GZIP_MAGIC = b"\x1f\x8b"
# The most ``Sitemap:`` lines of a robots.txt read (each then as a configured sitemap is).
MAX_LISTED_SITEMAPS = 10


# --- robots.txt ----------------------------------------------------------------------------------


class Robots:
    """The site's robots.txt rules for our user agent (none: every page allowed, no delay)."""

    def __init__(self, parser: urllib.robotparser.RobotFileParser | None) -> None:
        self.parser = parser

    def allows(self, url: str) -> bool:
        return self.parser is None or self.parser.can_fetch(USER_AGENT, url)

    def sitemaps(self) -> list[str]:
        """The sitemaps its ``Sitemap:`` lines name (canonical URLs, without repeats; at most
        ``MAX_LISTED_SITEMAPS``), on any site: the caller keeps those on its own."""
        listed = (self.parser.site_maps() if self.parser is not None else None) or []
        found = [url for url in (canonical(line) for line in listed) if url is not None]
        return list(dict.fromkeys(found))[:MAX_LISTED_SITEMAPS]

    def delay(self) -> float:
        """Seconds to wait between two requests: the site's ``Crawl-delay`` (or its
        ``Request-rate``, whichever is longer), at most ``SOURCES_WEB_MAX_CRAWL_DELAY`` so a
        site cannot hold a worker with a day-long delay."""
        if self.parser is None:
            return 0.0
        asked = float(self.parser.crawl_delay(USER_AGENT) or 0)
        rate = self.parser.request_rate(USER_AGENT)
        if rate is not None and rate.requests > 0:
            asked = max(asked, rate.seconds / rate.requests)
        return max(0.0, min(asked, settings.SOURCES_WEB_MAX_CRAWL_DELAY))


def load_robots(site: Site, root: str, deadline: float) -> Robots:
    """The rules of ``root``'s robots.txt: none when it is missing (a 4xx) or redirects off the
    site; :class:`Refused` when it cannot be read now (an error answer, a timeout), since guessing
    would either crawl what the site forbids or drop every page."""
    try:
        answer = get(root + "robots.txt", site, max_bytes=ROBOTS_MAX_BYTES, deadline=deadline)
    except Refused as refused:
        if refused.code == "redirect_off_site":
            return Robots(None)
        raise
    if 400 <= answer.status < 500:
        return Robots(None)
    if not answer.ok or answer.body is None:
        raise Refused("robots_unavailable", gettext_noop("The site's robots.txt could not be read."))
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(answer.body[:ROBOTS_MAX_BYTES].decode("utf-8", "replace").splitlines())
    return Robots(parser)


# --- a page's own directives -----------------------------------------------------------------------


def _directives(text: str) -> set[str]:
    found = {word.strip().lower() for word in text.split(",") if word.strip()}
    if "none" in found:
        found |= {NOINDEX, NOFOLLOW}
    return found


def header_directives(headers: httpx.Headers) -> set[str]:
    """The ``X-Robots-Tag`` directives meant for every crawler or for ours by name; those naming
    another crawler (``otherbot: noindex``) do not apply."""
    found: set[str] = set()
    for value in headers.get_list("x-robots-tag"):
        named = _AGENT_PREFIX.match(value)
        if named and named.group(1).lower() not in _VALUED:
            if named.group(1).lower() != AGENT:
                continue
            value = named.group(2)
        found |= _directives(value)
    return found


def meta_directives(tree: LexborHTMLParser) -> set[str]:
    """The directives of the page's ``<meta name="robots">`` (or one naming our agent)."""
    found: set[str] = set()
    for node in tree.css("meta[name]"):
        if (node.attributes.get("name") or "").strip().lower() in ("robots", AGENT):
            found |= _directives(node.attributes.get("content") or "")
    return found


# --- conditional requests ------------------------------------------------------------------------


def conditional_headers(marker: str | None) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` from a page's stored marker
    (``etag:<ETag>|lm:<Last-Modified>``); none for a marker that is a hash of the body."""
    if not marker or not marker.startswith("etag:") or "|lm:" not in marker:
        return {}
    etag, modified = marker[len("etag:") :].rsplit("|lm:", 1)
    headers = {}
    if etag:
        headers["if-none-match"] = etag
    if modified:
        headers["if-modified-since"] = modified
    return headers


# --- gzip ----------------------------------------------------------------------------------------


def gunzip(data: bytes, limit: int) -> bytes:
    """``data`` unpacked, refused (``ValueError``) when it is not gzip, is cut short or unpacks to
    more than ``limit`` bytes: a small file that unpacks to gigabytes stops at ``limit + 1``."""
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(data, limit + 1)
    except zlib.error:
        raise ValueError("not gzip") from None
    if len(out) > limit or unpacker.unconsumed_tail:
        raise ValueError("larger than the limit once unpacked")
    if not unpacker.eof:
        raise ValueError("cut short")
    return out
