"""Sitemaps of a web source from a real HTTP server on 127.0.0.1: a gzipped sitemap index whose
sitemaps are ``.xml.gz`` files or sent with ``Content-Encoding: gzip``, and a gzip bomb refused
at the page size limit before it is unpacked whole."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import pytest

from documents.sources.models import Source, SourceItem
from documents.sources.services import sync_start
from documents.sources.webrules import gunzip
from jobs.models import Status
from tests.documents import source_helpers
from tests.documents.helpers import make_tenant, run_until_idle
from tests.documents.source_helpers import allow_local_site, sync
from tests.documents.web_site import Page, Site, html, serve

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(settings) -> Iterator[Site]:
    allow_local_site(settings)
    with serve() as server:
        yield server


def map_source(server: Site, path: str) -> Source:
    return source_helpers.web_source(make_tenant(), {"sitemap": server.url(path)}, name="Map")


def urlset(server: Site, *paths: str) -> str:
    locs = "".join(f"<url><loc>{server.url(p)}</loc></url>" for p in paths)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'


def test_a_gzipped_sitemap_index_lists_the_pages_of_its_gzipped_sitemaps(site):
    index = "".join(f"<sitemap><loc>{site.url(p)}</loc></sitemap>" for p in ("pages.xml.gz", "more.xml"))
    site.pages = {
        "/index.xml.gz": Page(
            gzip.compress(f"<sitemapindex>{index}</sitemapindex>".encode()), "application/gzip"
        ),
        # A .xml.gz file, served as what it is.
        "/pages.xml.gz": Page(gzip.compress(urlset(site, "one").encode()), "application/x-gzip"),
        # A plain sitemap the server compresses on the way (Content-Encoding).
        "/more.xml": Page(
            gzip.compress(urlset(site, "two").encode()),
            "application/xml",
            headers={"Content-Encoding": "gzip"},
        ),
        "/one": Page(html(text="The lighthouse keeper logs every passing ship.")),
        "/two": Page("The orchard's pears ripen in September.", "text/plain"),
    }
    done = sync(map_source(site, "index.xml.gz"))
    assert done.counts["new"] == 2
    assert set(SourceItem.objects.values_list("key", flat=True)) == {site.url("one"), site.url("two")}
    asked = {r.path: r.headers.get("accept-encoding") for r in site.requests}
    assert asked["/more.xml"] == "gzip, identity" and asked["/one"] == "identity"


def test_a_sitemap_that_unpacks_past_the_page_limit_is_refused(site, settings):
    settings.SOURCES_WEB_MAX_PAGE_BYTES = 200_000
    # 50 MB of white space around one entry: about 50 KB packed, far past the limit unpacked.
    bomb = urlset(site, "one").replace("<urlset", " " * 50_000_000 + "<urlset", 1)
    packed = gzip.compress(bomb.encode(), compresslevel=9)
    assert len(packed) < settings.SOURCES_WEB_MAX_PAGE_BYTES
    site.pages = {
        "/map.xml.gz": Page(packed, "application/gzip"),
        "/one": Page(html(text="Never listed.")),
    }
    job = run_until_idle(sync_start(source=map_source(site, "map.xml.gz")).sync.job_id)
    assert (job.status, job.error_code) == (Status.FAILED, "web_unavailable")
    assert "/one" not in site.paths() and not SourceItem.objects.exists()


def test_gunzip_stops_at_the_limit():
    packed = gzip.compress(b"x" * 1_000_000)
    assert gunzip(gzip.compress(b"x" * 1000), 1000) == b"x" * 1000
    for data, limit, why in (
        (packed, 999_999, "larger than the limit"),
        (packed[:-8], 2_000_000, "cut short"),
        (b"plain", 100, "not gzip"),
    ):
        with pytest.raises(ValueError, match=why):
            gunzip(data, limit)


def robots_site(site: Site, sitemap_status: int = 200) -> None:
    """A site whose robots.txt lists a gzipped sitemap of its own, one on another site and one
    that is missing; the sitemap names a page no link reaches."""
    site.pages = {
        "/robots.txt": Page(
            "User-agent: *\nDisallow: /private\n"
            f"Sitemap: {site.url('site.xml.gz')}\n"
            "Sitemap: https://elsewhere.example/map.xml\n"
            f"Sitemap: {site.url('gone.xml')}\n",
            "text/plain",
        ),
        "/": Page(html("/guide", text="Welcome to the harbour's pages.")),
        "/guide": Page(html("/", text="The harbour master rings the bell at noon.")),
        "/site.xml.gz": Page(
            gzip.compress(urlset(site, "", "orphan", "private/ledger").encode()),
            "application/gzip",
            status=sitemap_status,
        ),
        "/orphan": Page(html(text="The old ferry timetable, linked from nowhere.")),
        "/private/ledger": Page(html(text="Never read: robots.txt forbids it.")),
    }


def crawl_source(site: Site, **config: Any) -> Source:
    return source_helpers.web_source(
        make_tenant(), {"start_urls": [site.root], "max_depth": 1, **config}, name="Harbour"
    )


def test_the_sitemaps_robots_txt_lists_add_the_pages_a_crawl_does_not_reach(site):
    robots_site(site)
    done = sync(crawl_source(site))
    assert set(SourceItem.objects.values_list("key", flat=True)) == {
        site.root,
        site.url("guide"),
        site.url("orphan"),
    }
    assert done.counts["new"] == 3
    # The listing: the crawl, then the sitemaps (a missing one lists nothing, the other site's
    # is not asked for), then only the page the crawl did not read; robots.txt is kept to.
    listing = site.paths()[: site.paths().index("/robots.txt", 1)]
    assert listing == ["/robots.txt", "/", "/guide", "/site.xml.gz", "/gone.xml", "/orphan"]
    assert "/private/ledger" not in site.paths()


def test_the_sitemaps_robots_txt_lists_keep_to_the_page_limit(site):
    robots_site(site)
    sync(crawl_source(site, page_limit=2))  # the crawl reads both pages it may
    assert "/site.xml.gz" not in site.paths()
    assert set(SourceItem.objects.values_list("key", flat=True)) == {site.root, site.url("guide")}


def test_a_sitemap_robots_txt_lists_that_cannot_be_read_fails_the_sync_and_changes_nothing(site):
    robots_site(site)
    source = crawl_source(site)
    assert sync(source).counts["new"] == 3
    robots_site(site, sitemap_status=503)
    job = run_until_idle(sync_start(source=source).sync.job_id)
    assert (job.status, job.error_code) == (Status.FAILED, "web_unavailable")
    assert SourceItem.objects.filter(source=source).count() == 3  # the orphan is not taken as gone
