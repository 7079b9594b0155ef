"""Web sources (docs/sources.md, "Web sites"): the pages of one site, found by a crawl from start
URLs or by the site's sitemap, each an item keyed by its canonical URL.

- **Settings**: ``start_urls`` (one site: same scheme, host and port) or ``sitemap``; ``max_depth``
  and ``page_limit`` (defaults and caps from the operator's ``SOURCES_WEB_*`` settings);
  ``include_prefix`` (only pages whose path starts with it are items). Credentials: a bearer
  token or one header, sent to the site's own origin only.
- **Listing**: robots.txt honoured (for :data:`~documents.sources.webfetch.USER_AGENT`), with its
  ``Crawl-delay`` kept between requests (at most ``SOURCES_WEB_MAX_CRAWL_DELAY``; the waits count
  against the listing's time and a cancel ends them at once); a page's ``noindex`` (its
  ``<meta name="robots">`` or ``X-Robots-Tag``) keeps it out of the items and ``nofollow`` keeps
  its links unfollowed; links of HTML pages found with selectolax (the HTML parser's library); a
  sitemap may be a sitemap index and gzipped (unpacked within the page size limit), and a crawl
  also reads the same-site sitemaps robots.txt lists (``Sitemap:``) for pages it missed; at most
  ``page_limit`` pages read and ``SOURCES_WEB_LISTING_TIMEOUT`` seconds spent. A start page,
  sitemap or robots.txt that cannot be read fails the sync (``web_unavailable``) and changes
  nothing: an unreadable site never looks like a site whose pages are all gone.
- **Marker**: the answer's ``ETag`` and ``Last-Modified``, else the SHA-256 of the body; the sync
  then compares content hashes as for any kind. A re-sync asks for a page whose links are not
  needed with ``If-None-Match`` / ``If-Modified-Since`` from its stored marker: a 304 keeps the
  marker, with no body read.
- **Items**: the page's bytes uploaded as a file named for its type (``.html``, ``.txt``, ``.md``,
  ``.pdf``, ``.docx``), so the normal pipeline parses it in its sandbox. A page of another type,
  over the size limit or answering with an error is a per-item failure with its code.

Every request goes through ``webfetch.py`` (SSRF rules, one deadline, size cap); the site's own
rules (robots.txt, directives, conditional headers, gzip) are ``webrules.py``'s (both here).
"""

# long-module: the kind's settings, its crawl and sitemap listing and its connector share the
# page rules (scope, prefix, robots, types, markers); apart, each would import all of them back.

from __future__ import annotations

import hashlib
import io
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import defusedxml.ElementTree as SafeXML
from django.conf import settings
from django.utils.translation import gettext_noop
from selectolax.lexbor import LexborHTMLParser

from documents import parsers
from documents.causes import WEB_TOO_SLOW, WEB_UNAVAILABLE
from documents.parsers.content import decode_text
from documents.sources.connectors import MAX_KEY_LENGTH, Fetched, Listed, Refused, SourceKind
from documents.sources.models import SourceItem
from documents.sources.webfetch import (
    Answer,
    Site,
    allowed_networks,
    always,
    canonical,
    get,
    origin_of,
)
from documents.sources.webrules import (
    GZIP_MAGIC,
    NOFOLLOW,
    NOINDEX,
    Robots,
    conditional_headers,
    gunzip,
    header_directives,
    load_robots,
    meta_directives,
)
from jobs.errors import StageFailure

if TYPE_CHECKING:
    import httpx

    from documents.sources.models import Source

DEFAULT_DEPTH = 3
DEFAULT_PAGE_LIMIT = 100
MAX_START_URLS = 20
MAX_PREFIX = 500
MAX_SITEMAPS = 50
MAX_MARKER = 200
# The marker of a page the listing could not read (an error answer, a timeout): compared again,
# and a page never applied is tried by the apply stage, where its failure is recorded.
UNREAD = "unread"
# Links to these are never documents: not requested at all.
_SKIPPED_SUFFIXES = frozenset(
    (  # noqa: SIM905 (a list of words reads best as words)
        ".png .jpg .jpeg .gif .svg .webp .ico .bmp .tif .tiff .css .js .mjs .json .xml .rss .atom .zip "
        ".gz .tgz .tar .bz2 .xz .7z .rar .mp3 .mp4 .m4a .ogg .wav .webm .avi .mov .mkv .woff .woff2 "
        ".ttf .otf .eot .exe .dmg .iso .apk .bin"
    ).split()
)
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
# Headers a credential may not set: the request's own framing and identity.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "user-agent", "te"}
)
_CREDENTIAL_KEYS = ("bearer_token", "header_name", "header_value")


# --- types -------------------------------------------------------------------------------------


def _accepted() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Media type -> (the extension the upload gets, the kind's extensions): every type the upload
    reads except images (a site's pictures are not its documents)."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for parser in parsers.registered():
        for kind in parser.kinds:
            if not kind.content_type.startswith("image/") and kind.extensions:
                found[kind.content_type] = (kind.extensions[0], kind.extensions)
    aliases = {"application/xhtml+xml": "text/html", "text/x-markdown": "text/markdown"}
    found.update({alias: found[real] for alias, real in aliases.items() if real in found})
    return found


def type_of(answer: Answer) -> tuple[str, tuple[str, ...]] | None:
    """The upload extension and kind extensions of the answer's type, or None for one not read.
    A missing or generic type is judged by the URL's own extension."""
    accepted = _accepted()
    media = answer.media_type
    if media in accepted:
        return accepted[media]
    if media in ("", "application/octet-stream", "binary/octet-stream"):
        suffix = _suffix(answer.url)
        for extension, extensions in accepted.values():
            if suffix and suffix in extensions:
                return extension, extensions
    return None


def _suffix(url: str) -> str:
    name = urlsplit(url).path.rsplit("/", 1)[-1]
    return "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""


def filename_for(url: str, extension: str, extensions: tuple[str, ...]) -> str:
    """The file name a page's document gets: the URL's last segment (the host for the root), with
    the extension of its type unless it has one of that kind already."""
    parts = urlsplit(url)
    name = unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) or (parts.hostname or "page")
    markdown = _accepted().get("text/markdown", ("", ()))[1]
    suffix = _suffix(url)
    if suffix in extensions or (extension == ".txt" and suffix in markdown):
        return name
    return name + extension


def is_html(answer: Answer) -> bool:
    return answer.media_type in ("text/html", "application/xhtml+xml")


def marker_of(headers: httpx.Headers, body: bytes | None) -> str:
    """The page's change marker: its ETag and Last-Modified, else the SHA-256 of its body."""
    etag, modified = headers.get("etag", "").strip(), headers.get("last-modified", "").strip()
    if etag or modified:
        text = f"etag:{etag}|lm:{modified}"
    elif body is not None:
        text = "sha256:" + hashlib.sha256(body).hexdigest()
    else:
        text = "length:" + headers.get("content-length", "")
    return text if len(text) <= MAX_MARKER else "h:" + hashlib.sha256(text.encode()).hexdigest()


def _has_marker(headers: httpx.Headers) -> bool:
    return bool(headers.get("etag", "").strip() or headers.get("last-modified", "").strip())


def max_page_bytes() -> int:
    return int(min(settings.SOURCES_WEB_MAX_PAGE_BYTES, settings.DOCUMENTS_MAX_UPLOAD_BYTES))


# --- settings and credentials --------------------------------------------------------------------


def _url(value: Any, field: str) -> str:
    url = canonical(value) if isinstance(value, str) and len(value) <= MAX_KEY_LENGTH else None
    if url is None:
        raise Refused(
            "invalid_url", gettext_noop("Give a full http:// or https:// URL, without a user name."), field
        )
    return url


def _bounded(config: dict[str, Any], name: str, default: int, low: int, cap: int, code: str) -> int:
    value = config.get(name, min(default, cap))
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= cap:
        message = (
            gettext_noop("The page limit is a number from 1 to the operator's limit.")
            if name == "page_limit"
            else gettext_noop("The depth is a number from 0 to the operator's limit.")
        )
        raise Refused(code, message, name)
    return value


def clean_config(config: Any) -> dict[str, Any]:
    """The settings as stored, once their site's addresses are allowed (:class:`Refused` with the
    field otherwise)."""
    if not isinstance(config, dict):
        raise Refused("invalid_config", gettext_noop("The settings must be an object."), "config")
    unknown = sorted(set(config) - {"start_urls", "sitemap", "max_depth", "page_limit", "include_prefix"})
    if unknown:
        raise Refused(
            "invalid_config", gettext_noop("The settings hold a name this kind does not know."), unknown[0]
        )
    starts, sitemap = config.get("start_urls"), config.get("sitemap")
    if bool(starts) == bool(sitemap):
        raise Refused(
            "invalid_config", gettext_noop("Give either start URLs or a sitemap URL, not both."), "start_urls"
        )
    cleaned: dict[str, Any] = {}
    if sitemap:
        cleaned["sitemap"] = _url(sitemap, "sitemap")
        field, urls = "sitemap", [cleaned["sitemap"]]
    else:
        if not isinstance(starts, list) or not 1 <= len(starts) <= MAX_START_URLS:
            raise Refused(
                "invalid_url", gettext_noop("Start URLs are a list of one to twenty URLs."), "start_urls"
            )
        urls = list(dict.fromkeys(_url(url, "start_urls") for url in starts))
        if len({origin_of(url) for url in urls}) > 1:
            raise Refused(
                "invalid_url",
                gettext_noop("All start URLs must be on one site (the same scheme, host and port)."),
                "start_urls",
            )
        cleaned["start_urls"], field = urls, "start_urls"
    cleaned["max_depth"] = _bounded(
        config, "max_depth", DEFAULT_DEPTH, 0, settings.SOURCES_WEB_MAX_DEPTH, "invalid_depth"
    )
    cleaned["page_limit"] = _bounded(
        config, "page_limit", DEFAULT_PAGE_LIMIT, 1, settings.SOURCES_WEB_MAX_PAGES, "invalid_page_limit"
    )
    prefix = config.get("include_prefix") or ""
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX or (prefix and not prefix.startswith("/")):
        raise Refused(
            "invalid_prefix", gettext_noop("The include prefix is a path starting with /."), "include_prefix"
        )
    if prefix and any(not char.isprintable() or char.isspace() for char in prefix):
        raise Refused(
            "invalid_prefix", gettext_noop("The include prefix is a path starting with /."), "include_prefix"
        )
    cleaned["include_prefix"] = prefix
    try:
        Site(origin_of(urls[0]), networks=allowed_networks()).check(urls[0], settings.SOURCES_WEB_TIMEOUT)
    except Refused as refused:
        raise Refused(refused.code, refused.message, field) from None
    return cleaned


def _bad_credentials(message: str) -> Refused:
    return Refused("invalid_credentials", message, "credentials")


def clean_credentials(given: Any, stored: dict[str, str]) -> dict[str, str]:
    """``bearer_token``, or ``header_name`` with ``header_value``: what is given over what is
    stored (an empty value removes one). The refusals never repeat a value."""
    if given is None:
        given = {}
    if not isinstance(given, dict) or any(key not in _CREDENTIAL_KEYS for key in given):
        raise _bad_credentials(
            gettext_noop("Web site credentials are bearer_token, or header_name with header_value.")
        )
    merged = dict(stored)
    for key, value in given.items():
        if not isinstance(value, str):
            raise _bad_credentials(gettext_noop("Each credential is a text."))
        if value:
            merged[key] = value
        else:
            merged.pop(key, None)
    for value in merged.values():
        if len(value) > 4096 or any(not (char.isprintable() or char == " ") for char in value):
            raise _bad_credentials(
                gettext_noop("A credential may not hold line breaks or control characters.")
            )
    if ("header_name" in merged) != ("header_value" in merged):
        raise _bad_credentials(gettext_noop("A header credential needs both header_name and header_value."))
    name = merged.get("header_name", "")
    if name and (not _HEADER_NAME.match(name) or name.lower() in _RESERVED_HEADERS):
        raise _bad_credentials(gettext_noop("The header name is not one a credential may set."))
    return merged


def headers_of(credentials: dict[str, str]) -> dict[str, str]:
    headers = {}
    if credentials.get("bearer_token"):
        headers["authorization"] = f"Bearer {credentials['bearer_token']}"
    if credentials.get("header_name") and credentials.get("header_value"):
        headers[credentials["header_name"].lower()] = credentials["header_value"]
    return headers


# --- listing -------------------------------------------------------------------------------------


def read_html(body: bytes, base: str) -> tuple[list[str], set[str]]:
    """The canonical URLs an HTML page links to (``<a href>``, after its ``<base href>``) and the
    directives of its ``<meta name="robots">``."""
    decoded = decode_text(body)
    if decoded is None:
        return [], set()
    tree = LexborHTMLParser(decoded.text)
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        base = canonical(base_node.attributes.get("href") or "", base) or base
    found = []
    for node in tree.css("a[href]"):
        url = canonical(node.attributes.get("href") or "", base)
        if url is not None:
            found.append(url)
    return found, meta_directives(tree)


def _unavailable(detail: str) -> StageFailure:
    return StageFailure(WEB_UNAVAILABLE.code, detail)


Pause = Callable[[float], None]


class Pacer:
    """The site's ``Crawl-delay`` kept between one stage's requests. ``pause`` waits; the sync
    gives one that is a safe point (a cancel stops it at once), holding no transaction."""

    def __init__(self, pause: Pause = time.sleep) -> None:
        self.pause = pause
        self.delay = 0.0
        self.last: float | None = None

    def due(self) -> float:
        """Seconds until the next request may go."""
        if not self.delay or self.last is None:
            return 0.0
        return max(0.0, self.last + self.delay - time.monotonic())

    @contextmanager
    def turn(self) -> Iterator[None]:
        """One request: after the delay since the last one ended (so the site has the whole
        delay however long an answer took)."""
        if (left := self.due()) > 0:
            self.pause(left)
        try:
            yield
        finally:
            self.last = time.monotonic()


def _directives_of(answer: Answer, body_directives: set[str]) -> set[str]:
    return header_directives(answer.headers) | body_directives


class Lister:
    """One listing of a site: the crawl from its start URLs or the entries of its sitemap.

    ``known``: each item's marker as last applied; a page whose marker holds an ETag or a
    Last-Modified date and whose links are not needed is asked for conditionally, and a 304
    keeps its marker without a body."""

    def __init__(
        self,
        site: Site,
        config: dict[str, Any],
        *,
        known: dict[str, str] | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.site = site
        self.config = config
        self.prefix = str(config.get("include_prefix") or "")
        self.limit = int(config.get("page_limit") or 1)
        self.deadline = time.monotonic() + settings.SOURCES_WEB_LISTING_TIMEOUT
        self.found: dict[str, str] = {}
        self.seen: set[str] = set()
        self.requests = 0
        self.robots = Robots(None)
        self.known = known or {}
        self.pacer = pacer or Pacer()

    def inside(self, url: str) -> bool:
        return self.site.holds(url) and urlsplit(url).path.startswith(self.prefix)

    def run(self) -> list[Listed]:
        first = str(self.config.get("sitemap") or self.config["start_urls"][0])
        try:
            with self.pacer.turn():
                self.robots = load_robots(self.site, canonical("/", first) or first, self.deadline)
        except Refused as refused:
            raise _unavailable(f"robots.txt: {refused.code}") from None
        self.pacer.delay = self.robots.delay()
        if self.config.get("sitemap"):
            self.read_sitemaps([str(self.config["sitemap"])])
        else:
            self.crawl([str(url) for url in self.config["start_urls"]])
            # The sitemaps the site's robots.txt lists (on this site) add the pages the crawl
            # did not reach, within the same page limit; one that is missing lists nothing.
            listed = [url for url in self.robots.sitemaps() if self.site.holds(url)]
            if listed and self.requests < self.limit:
                self.read_sitemaps(listed, missing_ok=True)
        return [Listed(key, marker) for key, marker in sorted(self.found.items())]

    def read_sitemaps(self, urls: list[str], *, missing_ok: bool = False) -> None:
        for url in self.sitemap_entries(urls, missing_ok=missing_ok):
            if self.requests >= self.limit:
                break
            if url not in self.seen:
                self.seen.add(url)
                self.visit(url, depth=0, start=False, crawl=False)

    def crawl(self, starts: list[str]) -> None:
        queue = deque((url, 0) for url in starts)
        self.seen.update(starts)
        while queue and self.requests < self.limit:
            url, depth = queue.popleft()
            for link in self.visit(url, depth=depth, start=depth == 0, crawl=True):
                if link not in self.seen and self.inside(link) and _suffix(link) not in _SKIPPED_SUFFIXES:
                    self.seen.add(link)
                    queue.append((link, depth + 1))

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """One request after the site's Crawl-delay, within the listing's time (failing at once
        when the delay would outlast it)."""
        if time.monotonic() + self.pacer.due() >= self.deadline:
            if self.pacer.delay:
                raise StageFailure(
                    WEB_TOO_SLOW.code,
                    f"a Crawl-delay of {self.pacer.delay:g} s outlasts SOURCES_WEB_LISTING_TIMEOUT",
                )
            raise _unavailable("the listing took longer than SOURCES_WEB_LISTING_TIMEOUT")
        with self.pacer.turn():
            yield

    def visit(self, url: str, *, depth: int, start: bool, crawl: bool) -> list[str]:
        """Read one page: list it (if it is inside the prefix and the page allows it) and answer
        its links to follow (unless the page says ``nofollow``)."""
        if time.monotonic() >= self.deadline:
            raise _unavailable("the listing took longer than SOURCES_WEB_LISTING_TIMEOUT")
        if not self.robots.allows(url) or len(url) > MAX_KEY_LENGTH:
            return []
        self.requests += 1
        follow = crawl and depth < int(self.config.get("max_depth") or 0)
        # Unchanged since it was applied (a 304): its marker stays. Not for a page whose links
        # are wanted, since a 304 has no body to find them in.
        conditional = {} if follow else conditional_headers(self.known.get(url))

        def wants_body(status: int, headers: httpx.Headers) -> bool:
            html = headers.get("content-type", "").split(";", 1)[0].strip().lower() in (
                "text/html",
                "application/xhtml+xml",
            )
            # An HTML page's body is read for its links and its <meta name="robots">.
            return 200 <= status < 300 and (html or not _has_marker(headers))

        try:
            with self._turn():
                answer = get(
                    url,
                    self.site,
                    wants_body=wants_body,
                    max_bytes=max_page_bytes(),
                    deadline=self.deadline,
                    conditional=conditional,
                )
        except Refused as refused:
            if start:
                raise _unavailable(f"start page: {refused.code}") from None
            if refused.code != "redirect_off_site" and self.inside(url):
                self.found.setdefault(url, UNREAD)  # tried again by the apply stage, or kept
            return []
        if answer.status == 304 and conditional and answer.url == url:
            self.seen.add(url)
            self.found[url] = self.known[url]
            return []
        if not answer.ok:
            if start:
                raise _unavailable(f"start page: HTTP {answer.status}")
            if answer.status not in (404, 410) and self.inside(url):
                self.found.setdefault(url, UNREAD)
            return []
        key = answer.url
        self.seen.add(key)
        readable = answer.body is not None and not answer.too_large and is_html(answer)
        links, meta = read_html(answer.body, key) if readable and answer.body is not None else ([], set())
        directives = _directives_of(answer, meta)
        if (
            NOINDEX not in directives
            and self.inside(key)
            and self.robots.allows(key)
            and len(key) <= MAX_KEY_LENGTH
        ):
            self.found[key] = marker_of(answer.headers, answer.body if not answer.too_large else None)
        if not follow or NOFOLLOW in directives or not readable:
            return []
        if not start and not self.inside(key):
            return []
        return links

    def sitemap_entries(self, urls: list[str], *, missing_ok: bool = False) -> list[str]:
        """The site's pages the sitemaps ``urls`` (or sitemap indexes, one level) list, in their
        order, up to the page limit, at most ``MAX_SITEMAPS + 1`` sitemaps read in all;
        :class:`StageFailure` when a sitemap cannot be read. ``missing_ok``: a sitemap that is
        missing (a 4xx, or a redirect off the site) lists nothing instead. A sitemap may be
        gzipped (``.xml.gz``, or sent with ``Content-Encoding: gzip``)."""
        entries: list[str] = []
        sitemaps, index = list(dict.fromkeys(urls)), 0
        roots = len(sitemaps)
        while index < len(sitemaps) and index <= MAX_SITEMAPS and len(entries) < self.limit:
            root = self._sitemap(sitemaps[index], missing_ok=missing_ok)
            index += 1
            if root is None:
                continue
            for loc in root.iter():
                if not str(loc.tag).endswith("loc") or not loc.text:
                    continue
                found = canonical(loc.text)
                if found is None or not self.site.holds(found):
                    continue
                if str(root.tag).endswith("sitemapindex"):
                    if index <= roots and found not in sitemaps:
                        sitemaps.append(found)
                elif self.inside(found) and found not in entries:
                    entries.append(found)
        return entries[: self.limit]

    def _sitemap(self, url: str, *, missing_ok: bool = False) -> Any:
        try:
            with self._turn():
                answer = get(url, self.site, max_bytes=max_page_bytes(), deadline=self.deadline, gzip=True)
        except Refused as refused:
            if missing_ok and refused.code == "redirect_off_site":
                return None
            raise _unavailable(f"sitemap: {refused.code}") from None
        if missing_ok and 400 <= answer.status < 500:
            return None
        if not answer.ok or answer.body is None or answer.too_large:
            raise _unavailable(f"sitemap: HTTP {answer.status}")
        body = answer.body
        try:
            # Sent gzipped, and a .xml.gz file besides: at most two layers, each within the limit.
            for _layer in range(2):
                if answer.gzipped or body.startswith(GZIP_MAGIC):
                    body = gunzip(body, max_page_bytes())
                    answer = Answer(answer.url, answer.status, answer.headers, body, False)
        except ValueError as refused:
            raise _unavailable(f"sitemap: gzip {refused}") from None
        if body.startswith(GZIP_MAGIC):
            raise _unavailable("sitemap: gzip layers within gzip layers")
        try:
            return SafeXML.fromstring(body, forbid_dtd=True, forbid_entities=True, forbid_external=True)
        except Exception:  # defusedxml's refusals and the XML parser's errors alike
            raise _unavailable("sitemap: not a readable sitemap") from None


# --- the connector -------------------------------------------------------------------------------


class WebConnector:
    """A web source opened for one stage (``connectors.Connector``, and ``connectors.Paced``: its
    requests keep the site's Crawl-delay, waiting with the stage's pause)."""

    def __init__(self, site: Site, config: dict[str, Any], source_id: Any = None) -> None:
        self.site = site
        self.config = config
        self.source_id = source_id
        self.pacer = Pacer()
        self._robots: Robots | None = None

    def use_pause(self, pause: Pause) -> None:
        self.pacer.pause = pause

    def robots(self) -> Robots:
        if self._robots is None:
            first = str(self.config.get("sitemap") or self.config["start_urls"][0])
            with self.pacer.turn():
                self._robots = load_robots(
                    self.site, canonical("/", first) or first, time.monotonic() + settings.SOURCES_WEB_TIMEOUT
                )
            self.pacer.delay = self._robots.delay()
        return self._robots

    def known(self) -> dict[str, str]:
        """Each item's marker as last applied (for conditional requests)."""
        if self.source_id is None:
            return {}
        return dict(
            SourceItem.objects.filter(source_id=self.source_id, document__isnull=False)
            .exclude(marker="")
            .values_list("key", "marker")
        )

    def listing(self) -> Iterator[Listed | tuple[str, str]]:
        yield from Lister(self.site, self.config, known=self.known(), pacer=self.pacer).run()

    def _read(self, key: str) -> tuple[Answer, bytes, str]:
        """The page's answer, body and upload extension: :class:`Refused` for one that may not or
        cannot be read now, ``OSError`` for one that is gone (or moved, or marked ``noindex``)
        since the listing."""
        if not self.robots().allows(key):
            raise Refused(
                "robots_disallowed", gettext_noop("The site's robots.txt no longer allows this page.")
            )
        with self.pacer.turn():
            answer = get(key, self.site, max_bytes=max_page_bytes(), follow=False)
        if answer.status in (404, 410) or 300 <= answer.status < 400:
            raise OSError(f"HTTP {answer.status}")
        if not answer.ok:
            raise Refused(
                "page_error",
                gettext_noop("The site answered this page with an error. The next sync tries again."),
            )
        kind = type_of(answer)
        if kind is None:
            raise Refused(
                "unsupported_type",
                gettext_noop(
                    "The page is not of a type the platform reads (HTML, text, Markdown, PDF, Word)."
                ),
            )
        if answer.too_large or answer.body is None:
            raise Refused("file_too_large", gettext_noop("The page is larger than the limit for a web page."))
        if self._noindex(answer):
            raise OSError("noindex")
        return answer, answer.body, filename_for(key, *kind)

    def _noindex(self, answer: Answer) -> bool:
        meta = read_html(answer.body, answer.url)[1] if answer.body and is_html(answer) else set()
        return NOINDEX in _directives_of(answer, meta)

    @contextmanager
    def fetch(self, key: str) -> Iterator[Fetched]:
        answer, body, filename = self._read(key)
        yield Fetched(io.BytesIO(body), marker_of(answer.headers, body), filename)

    def digest(self, key: str) -> str:
        return hashlib.sha256(self._read(key)[1]).hexdigest()

    def exists(self, key: str) -> bool:
        """False only when the site says the page is gone: 404, 410, a redirect (the page it leads
        to is an item of its own), a robots.txt rule or ``noindex``; kept on an error or no answer
        (a page on the way to it may have failed this time)."""

        def html_only(status: int, headers: httpx.Headers) -> bool:  # for its <meta name="robots">
            return always(status, headers) and headers.get("content-type", "").lower().startswith(
                ("text/html", "application/xhtml+xml")
            )

        try:
            if not self.robots().allows(key):
                return False
            with self.pacer.turn():
                answer = get(key, self.site, wants_body=html_only, max_bytes=max_page_bytes(), follow=False)
        except Refused:
            return True
        if answer.ok and not answer.too_large and self._noindex(answer):
            return False
        return not (answer.status in (404, 410) or 300 <= answer.status < 400)


def site_of(source: Source, credentials: dict[str, str]) -> Site:
    config = source.config or {}
    first = str(config.get("sitemap") or (config.get("start_urls") or [""])[0])
    return Site(origin_of(first), headers_of(credentials), allowed_networks())


def connect(source: Source, credentials: dict[str, str]) -> WebConnector:
    """The source opened for a stage, once its site's addresses are still allowed."""
    config = dict(source.config or {})
    if not (config.get("sitemap") or config.get("start_urls")):
        raise Refused("invalid_config", gettext_noop("The source has no start URL or sitemap."), "config")
    site = site_of(source, credentials)
    first = str(config.get("sitemap") or config["start_urls"][0])
    site.check(first, settings.SOURCES_WEB_TIMEOUT)
    return WebConnector(site, config, source.pk)


def check_now(source: Source) -> None:
    connect(source, {})


KIND = SourceKind(
    kind="web",
    clean_config=clean_config,
    connect=connect,
    unavailable=WEB_UNAVAILABLE,
    clean_credentials=clean_credentials,
    check_now=check_now,
)
