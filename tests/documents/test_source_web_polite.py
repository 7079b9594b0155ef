"""What a site asks of a web source, against a real HTTP server on 127.0.0.1
(``tests/documents/web_site.py``): robots.txt's Crawl-delay (capped, within the listing's time,
stopped at once by a cancel), the ``noindex`` / ``nofollow`` of ``<meta name="robots">`` and of
``X-Robots-Tag``, and conditional requests on a re-sync (a 304 costs no body)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from django.utils import timezone

from documents.models import Document
from documents.sources.models import Source, SourceItem
from documents.sources.services import sync_start
from jobs.models import Actor, Job, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import wait_for
from tests.documents import source_helpers
from tests.documents.helpers import JobThread, make_tenant, run_until_idle
from tests.documents.source_helpers import allow_local_site, heartbeat_since, sync
from tests.documents.web_site import Page, Site, html, serve

pytestmark = pytest.mark.django_db


@pytest.fixture
def web(settings) -> None:
    allow_local_site(settings)


@pytest.fixture
def site(web) -> Iterator[Site]:
    with serve() as server:
        yield server


def web_source(server: Site, **config) -> Source:
    return source_helpers.web_source(make_tenant(), config or {"start_urls": [server.root]})


def keys() -> set[str]:
    return set(SourceItem.objects.values_list("key", flat=True))


def test_crawl_delay_spaces_the_listings_requests_cut_to_the_operators_maximum(site, settings):
    settings.SOURCES_WEB_MAX_CRAWL_DELAY = 0.3
    site.pages = {
        "/robots.txt": Page("User-agent: *\nCrawl-delay: 3600\n", "text/plain"),
        "/": Page(html("/a", "/b", text="Home")),
        "/a": Page(html(text="Page a")),
        "/b": Page("Page b", "text/plain"),
    }
    done = sync(web_source(site))
    assert done.counts["new"] == 3
    listing = site.requests[:4]  # robots.txt and the three pages
    assert [r.path for r in listing] == ["/robots.txt", "/", "/a", "/b"]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(listing)]
    assert all(gap >= 0.28 for gap in gaps), gaps
    # An hour asked, 0.3 s kept: the sync is over in seconds.
    assert site.requests[-1].at - site.requests[0].at < 15


def test_a_crawl_delay_longer_than_the_listings_time_fails_the_sync_without_waiting(site, settings):
    settings.SOURCES_WEB_MAX_CRAWL_DELAY = 60
    settings.SOURCES_WEB_LISTING_TIMEOUT = 5
    site.pages = {
        "/robots.txt": Page("User-agent: *\nCrawl-delay: 30\n", "text/plain"),
        "/": Page(html(text="Home")),
    }
    started = time.monotonic()
    job = run_until_idle(sync_start(source=web_source(site)).sync.job_id)
    assert (job.status, job.error_code) == (Status.FAILED, "web_too_slow")
    assert "Crawl-delay" in job.error_message and "127.0.0.1" not in job.error_message
    assert time.monotonic() - started < 5
    assert site.page_paths() == []


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_a_crawl_delay_stops_the_listing_at_once(site, settings):
    settings.JOBS_HEARTBEAT_SECONDS = 0.1
    settings.SOURCES_WEB_MAX_CRAWL_DELAY = 60
    settings.SOURCES_WEB_LISTING_TIMEOUT = 200
    site.pages = {
        "/robots.txt": Page("User-agent: *\nCrawl-delay: 60\n", "text/plain"),
        "/": Page(html("/a", text="Home")),
        "/a": Page(html(text="Page a")),
    }
    job_id = sync_start(source=web_source(site)).sync.job_id
    worker = JobThread(job_id)
    started = time.monotonic()
    worker.start()
    wait_for(lambda: site.paths() == ["/robots.txt"], what="robots.txt, then the crawl delay")
    fetched = timezone.now()
    wait_for(lambda: heartbeat_since(job_id, fetched), what="a heartbeat inside the crawl delay")
    job_cancel(job_id=job_id, actor=Actor.USER, actor_name="test", reason="test")
    worker.finish(timeout=30)
    assert Job.objects.get(pk=job_id).status == Status.CANCELLED
    assert time.monotonic() - started < 20  # not the minute the site asked for
    assert site.page_paths() == []


def test_noindex_and_nofollow_from_meta_tags_and_x_robots_tag(site):
    site.pages = {
        "/": Page(html("/hidden", "/closed", "/tagged.txt", "/other.txt", "/ours.txt", text="Home")),
        "/hidden": Page(
            '<html><head><meta name="robots" content="NoIndex"></head><body>'
            '<a href="/beyond">beyond</a></body></html>'
        ),
        "/closed": Page(
            '<html><head><meta name="robots" content="nofollow"></head><body>Closed door. '
            '<a href="/unseen">unseen</a></body></html>'
        ),
        "/beyond": Page(html(text="Found through a page that is not indexed itself.")),
        "/unseen": Page(html(text="Never asked for.")),
        "/tagged.txt": Page("Tagged.", "text/plain", headers={"X-Robots-Tag": "noindex, nofollow"}),
        "/other.txt": Page("For us.", "text/plain", headers={"X-Robots-Tag": "otherbot: noindex"}),
        "/ours.txt": Page(
            "Not for us.", "text/plain", headers={"X-Robots-Tag": "document-platform-sources: none"}
        ),
    }
    source = web_source(site)
    done = sync(source)
    assert keys() == {site.root, site.url("closed"), site.url("other.txt"), site.url("beyond")}
    assert done.counts["new"] == 4
    assert "/unseen" not in site.paths()
    # A page that says noindex later is removed like a page that is gone.
    site.pages["/closed"] = Page('<html><head><meta name="robots" content="noindex"></head></html>')
    closed = SourceItem.objects.get(key=site.url("closed")).document_id
    again = sync(source)
    assert again.counts["removed"] == 1
    assert Document.objects.get(pk=closed).deleted_at is not None


def test_a_resync_asks_conditionally_and_a_304_reads_no_body(site):
    site.pages = {
        "/sitemap.xml": Page(
            "<urlset>"
            + "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in ("one", "two", "three"))
            + "</urlset>",
            "application/xml",
        ),
        "/one": Page(html(text="The lighthouse keeper logs every ship."), headers={"ETag": '"one-1"'}),
        "/two": Page("The orchard's pears ripen in September.", "text/plain", headers={"ETag": '"two-1"'}),
        "/three": Page("No marker: read and hashed.", "text/plain"),
    }
    source = web_source(site, sitemap=site.url("sitemap.xml"))
    sync(source)
    assert site.not_modified == []
    before = len(site.requests)
    again = sync(source)
    assert again.counts["unchanged"] == 3
    asked = {r.path: r.headers.get("if-none-match") for r in site.requests[before:]}
    assert asked["/one"] == '"one-1"' and asked["/two"] == '"two-1"' and asked["/three"] is None
    assert sorted(site.not_modified) == ["/one", "/two"]
    # A new ETag: the page is read and becomes a new version.
    site.pages["/two"] = Page(
        "The orchard's pears ripen in October.", "text/plain", headers={"ETag": '"two-2"'}
    )
    third = sync(source)
    assert (third.counts["changed"], third.counts["unchanged"]) == (1, 2)
    assert SourceItem.objects.get(key=site.url("two")).marker == 'etag:"two-2"|lm:'
