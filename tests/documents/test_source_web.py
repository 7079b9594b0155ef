"""Web sources synced from a real HTTP server on 127.0.0.1 (``tests/documents/web_site.py``): the
first crawl, unchanged, changed and removed pages, robots.txt, page limit and depth, sitemaps,
redirects off the site or to a network not allowed, credentials kept to the site, oversize and
wrong-type pages, a server that never answers, and secrets kept out of every record."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from documents.kinds import INGEST
from documents.models import Deletion, Document, DocumentVersion
from documents.services.collections import default_collection
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.services import SourceRefused, source_create, sync_start
from documents.sources.web import filename_for
from documents.sources.webfetch import canonical
from jobs.models import Actor, Job, JobEvent, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import wait_for
from tests.documents import source_helpers
from tests.documents.helpers import JobThread, found_versions, make_tenant, run_until_idle, top_hit
from tests.documents.source_helpers import allow_local_site, heartbeat_since, sync
from tests.documents.web_site import Page, Site, html, serve

pytestmark = pytest.mark.django_db

TOKEN = "tok-7f3a9c-never-shown"


@pytest.fixture
def web(settings) -> None:
    allow_local_site(settings)


@pytest.fixture
def site(web) -> Iterator[Site]:
    with serve() as server:
        server.pages = {
            "/": Page(
                html("/guide", "notes.txt", "/logo.png", "https://elsewhere.example/x", text="Welcome")
            ),
            "/guide": Page(html("/", text="Every newcomer receives a brass compass on the first day.")),
            "/notes.txt": Page("The cafeteria serves saffron risotto on Thursdays.\n", "text/plain"),
        }
        yield server


def web_source(tenant, server: Site, *, credentials=None, **config) -> Source:
    return source_helpers.web_source(tenant, {"start_urls": [server.root], **config}, credentials=credentials)


def keys() -> set[str]:
    return set(SourceItem.objects.values_list("key", flat=True))


def failures() -> dict[str, str]:
    return dict(SourceItem.objects.exclude(error_code="").values_list("key", "error_code"))


def test_a_first_crawl_makes_every_page_a_searchable_document(site):
    tenant = make_tenant()
    done = sync(web_source(tenant, site))
    assert done.counts == {"found": 3, "new": 3, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0}
    assert keys() == {site.root, site.url("guide"), site.url("notes.txt")}
    hit = top_hit(tenant, "brass compass")
    assert hit is not None and hit.document_id == SourceItem.objects.get(key=site.url("guide")).document_id
    assert top_hit(tenant, "saffron risotto") is not None
    # The HTML page went through the upload as an .html file (parsed by the sandboxed pipeline).
    names = set(DocumentVersion.objects.values_list("original_name", "kind"))
    assert names == {("127.0.0.1.html", "html"), ("guide.html", "html"), ("notes.txt", "text")}
    # Links to pictures and to other sites are never requested.
    assert "/logo.png" not in site.paths()
    assert all(
        r.headers.get("user-agent", "").startswith("document-platform-sources/") for r in site.requests
    )


def test_an_unchanged_resync_uploads_nothing(site):
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    jobs, versions = Job.objects.filter(kind=INGEST).count(), DocumentVersion.objects.count()
    again = sync(source)
    assert again.counts["unchanged"] == 3 and again.counts["new"] == again.counts["changed"] == 0
    assert (Job.objects.filter(kind=INGEST).count(), DocumentVersion.objects.count()) == (jobs, versions)


def test_an_etag_that_stays_costs_no_body_at_compare(site):
    site.pages["/notes.txt"].headers = {"ETag": '"v1"'}
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    assert SourceItem.objects.get(key=site.url("notes.txt")).marker == 'etag:"v1"|lm:'
    before = len(site.requests)
    again = sync(source)
    assert again.counts["unchanged"] == 3
    # The listing asks for each page once; nothing is read again to compare or apply.
    assert site.page_paths()[before:].count("/notes.txt") == 1


def test_a_changed_page_becomes_a_new_version(site):
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    item = SourceItem.objects.get(key=site.url("notes.txt"))
    site.pages["/notes.txt"] = Page(
        "The cafeteria now serves juniper dumplings on Thursdays.\n", "text/plain"
    )
    done = sync(source)
    assert done.counts["changed"] == 1 and done.counts["unchanged"] == 2
    document = Document.objects.get(pk=item.document_id)
    assert document.latest_number == 2
    assert found_versions(tenant, "juniper dumplings") == {document.published_version_id}
    assert found_versions(tenant, "saffron risotto") == set()


def test_a_page_that_answers_404_is_deleted(site):
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    document_id = SourceItem.objects.get(key=site.url("notes.txt")).document_id
    del site.pages["/notes.txt"]  # still linked from the start page, now a 404
    done = sync(source)
    assert done.counts["removed"] == 1 and done.counts["unchanged"] == 2
    assert Deletion.objects.filter(document_id=document_id, via="source").exists()
    assert found_versions(tenant, "saffron risotto") == set()
    assert site.url("notes.txt") not in keys()


def test_a_page_that_fails_for_a_while_is_kept(site):
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    document_id = SourceItem.objects.get(key=site.url("guide")).document_id
    site.pages["/guide"] = Page("busy", "text/plain", status=503)
    done = sync(source)
    assert done.counts["removed"] == 0
    assert Document.objects.get(pk=document_id).deleted_at is None


def test_robots_txt_is_honoured(site):
    site.pages["/robots.txt"] = Page("User-agent: *\nDisallow: /guide\n", "text/plain")
    tenant = make_tenant()
    sync(web_source(tenant, site))
    assert keys() == {site.root, site.url("notes.txt")}
    assert "/guide" not in site.paths()


def test_the_depth_and_the_page_limit_bound_the_crawl(web):
    with serve() as server:
        server.pages = {
            "/": Page(html("/a", "/w1", "/w2", "/w3")),
            "/a": Page(html("/b", text="alpha")),
            "/b": Page(html("/c", text="beta")),
            "/c": Page(html(text="gamma")),
            **{f"/w{n}": Page(html(text=f"wide {n}")) for n in (1, 2, 3)},
        }
        tenant = make_tenant()
        sync(web_source(tenant, server, max_depth=1))
        assert keys() == {server.url(p) for p in ("", "a", "w1", "w2", "w3")}
        assert "/b" not in server.paths()
        SourceItem.objects.all().delete()
        requested = len(server.page_paths())
        sync(web_source(make_tenant("other"), server, max_depth=5, page_limit=3))
        assert len(SourceItem.objects.all()) == 3
        # Three pages read (by the listing, then again by the apply), no more.
        assert set(server.page_paths()[requested:]) == {"/", "/a", "/w1"}


def test_a_sitemap_lists_the_sites_pages(web):
    with serve() as server:
        locs = "".join(f"<url><loc>{server.url(p)}</loc></url>" for p in ("one", "two"))
        server.pages = {
            "/sitemap.xml": Page(
                f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}'
                "<url><loc>http://elsewhere.example/three</loc></url></urlset>",
                "application/xml",
            ),
            "/one": Page(html(text="The lighthouse keeper logs every passing ship.")),
            "/two": Page("Two: the orchard's pears ripen in September.", "text/plain"),
        }
        tenant = make_tenant()
        source = source_create(
            tenant=tenant,
            collection=default_collection(tenant),
            name="Map",
            kind=Source.Kind.WEB,
            config={"sitemap": server.url("sitemap.xml")},
        )
        done = sync(source)
        assert done.counts["new"] == 2 and keys() == {server.url("one"), server.url("two")}
        assert top_hit(tenant, "lighthouse keeper") is not None


def test_a_sitemap_with_entities_is_refused_and_changes_nothing(web):
    with serve() as server:
        server.pages = {
            "/sitemap.xml": Page(
                '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">]>'
                "<urlset><url><loc>&a;</loc></url></urlset>",
                "application/xml",
            ),
        }
        tenant = make_tenant()
        source = source_create(
            tenant=tenant,
            collection=default_collection(tenant),
            name="Map",
            kind=Source.Kind.WEB,
            config={"sitemap": server.url("sitemap.xml")},
        )
        job = run_until_idle(sync_start(source=source).sync.job_id)
        assert (job.status, job.error_code) == (Status.FAILED, "web_unavailable")


def test_a_redirect_off_the_site_is_not_followed_and_credentials_stay_on_the_site(web, settings):
    # Both loopback addresses are allowed: the redirect is refused for leaving the site.
    settings.SOURCES_WEB_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with serve() as server, serve("127.0.0.2") as other:
        other.pages = {"/landing": Page(html(text="elsewhere"))}
        server.pages = {
            "/": Page(html("/out", "/in", text="home")),
            "/out": Page(status=302, headers={"Location": other.url("landing")}),
            "/in": Page(status=301, headers={"Location": "/moved"}),
            "/moved": Page(html(text="The archive moved to the east wing.")),
        }
        tenant = make_tenant()
        sync(web_source(tenant, server, credentials={"bearer_token": TOKEN}))
        assert other.requests == []  # never contacted, so never given the token
        assert keys() == {server.root, server.url("moved")}  # a same-site redirect: its target
        assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in server.requests)


def test_an_address_no_longer_allowed_fails_the_sync_before_any_request(site, settings):
    tenant = make_tenant()
    source = web_source(tenant, site)
    settings.SOURCES_WEB_ALLOWED_NETWORKS = []  # the switch is off: loopback is private
    with pytest.raises(SourceRefused) as refused:
        sync_start(source=source)
    assert refused.value.code == "address_not_allowed"
    with pytest.raises(SourceRefused):
        web_source(tenant, site)  # nor may one be made
    assert site.requests == []


def test_a_start_url_redirecting_to_a_private_address_fails_the_sync(web):
    with serve() as server, serve("127.0.0.2") as private:
        server.pages = {"/": Page(status=302, headers={"Location": private.url("admin")})}
        tenant = make_tenant()
        job = run_until_idle(sync_start(source=web_source(tenant, server)).sync.job_id)
        assert (job.status, job.error_code) == (Status.FAILED, "web_unavailable")
        assert private.requests == []
        assert not SourceItem.objects.exists()


def test_oversize_and_wrong_type_pages_are_per_item_failures(site, settings):
    settings.SOURCES_WEB_MAX_PAGE_BYTES = 4000
    site.pages["/"] = Page(html("/guide", "/big.txt", "/photo", "/archive"))
    site.pages["/big.txt"] = Page("x" * 5000, "text/plain")
    site.pages["/photo"] = Page(b"\x89PNG\r\n\x1a\n" + b"0" * 100, "image/png")
    site.pages["/archive"] = Page(b"PK\x03\x04" + b"0" * 100, "application/zip")
    tenant = make_tenant()
    done = sync(web_source(tenant, site))
    assert failures() == {
        site.url("big.txt"): "file_too_large",
        site.url("photo"): "unsupported_type",
        site.url("archive"): "unsupported_type",
    }
    assert done.counts["failed"] == 3 and done.counts["new"] == 5
    assert SourceItem.objects.get(key=site.url("guide")).document_id is not None


def test_a_server_that_never_answers_fails_the_sync_within_the_deadline(web, settings):
    settings.SOURCES_WEB_TIMEOUT = 1
    with serve() as server:
        server.pages = {"/": Page(hang=True)}
        tenant = make_tenant()
        started = time.monotonic()
        job = run_until_idle(sync_start(source=web_source(tenant, server)).sync.job_id)
        assert (job.status, job.error_code) == (Status.FAILED, "web_unavailable")
        assert time.monotonic() - started < 30  # one request's deadline, with a wide margin


def test_a_page_that_never_answers_is_a_failure_of_its_own(site, settings):
    settings.SOURCES_WEB_TIMEOUT = 1
    site.pages["/slow"] = Page(hang=True)
    site.pages["/"] = Page(html("/guide", "/slow"))
    tenant = make_tenant()
    started = time.monotonic()
    done = sync(web_source(tenant, site))
    assert time.monotonic() - started < 60
    assert failures() == {site.url("slow"): "page_timeout"}
    assert done.counts["new"] == 3 and done.counts["failed"] == 1


def test_credentials_are_in_no_response_log_event_or_error(site, caplog):
    caplog.set_level(logging.DEBUG)
    site.pages["/private"] = Page("denied", "text/plain", status=403)
    site.pages["/"] = Page(html("/guide", "/private"))
    tenant = make_tenant()
    source = web_source(tenant, site, credentials={"header_name": "X-Api-Key", "header_value": TOKEN})
    sync(source)
    assert all(r.headers.get("x-api-key") == TOKEN for r in site.requests)
    assert failures() == {site.url("private"): "page_error"}
    source.refresh_from_db()
    assert TOKEN not in source.credentials and source.credentials
    assert TOKEN not in caplog.text
    records = [
        *JobEvent.objects.values_list("reason", flat=True),
        *Job.objects.values_list("error_message", flat=True),
        *SourceItem.objects.values_list("error_message", flat=True),
        *(str(s.listing) + str(s.plan) for s in SourceSync.objects.all()),
    ]
    assert records and not any(TOKEN in text for text in records)


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_compare_stops_before_the_next_page_is_read(site, settings):
    settings.JOBS_HEARTBEAT_SECONDS = 0.1
    site.pages["/"] = Page(html("/p1", "/p2", "/p3", "/p4"))
    for n in range(1, 5):
        site.pages[f"/p{n}"] = Page(f"Page {n}: first words.", "text/plain")
    tenant = make_tenant()
    source = web_source(tenant, site)
    sync(source)
    for n in range(1, 5):
        site.pages[f"/p{n}"] = Page(f"Page {n}: other words.", "text/plain")
    site.hold_from = len(site.requests) + 6  # the listing (robots.txt and five pages) goes through
    job_id = sync_start(source=source).sync.job_id
    worker = JobThread(job_id)
    worker.start()
    wait_for(lambda: len(site.requests) > (site.hold_from or 0), what="the compare's first read")
    job_cancel(job_id=job_id, actor=Actor.USER, actor_name="test", reason="test")
    asked = Job.objects.get(pk=job_id).cancel_requested_at
    assert asked is not None
    # Two heartbeats (every 0.1 s) since the cancel: the first one's answer has reached the stage.
    wait_for(
        lambda: heartbeat_since(job_id, asked + timedelta(seconds=0.2)), what="heartbeats since the cancel"
    )
    site.release.set()
    worker.finish()
    assert Job.objects.get(pk=job_id).status == Status.CANCELLED
    # The page being read when the cancel came was the last one: not every changed page.
    compared = [r.path for r in site.requests[site.hold_from :] if r.path != "/robots.txt"]
    assert compared == ["/p1"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("HTTP://Example.COM:80/a/./b/../c#frag", "http://example.com/a/c"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com:8443/x?q=1 2", "https://example.com:8443/x?q=1%202"),
        ("ftp://example.com/", None),
        ("https://user:pw@example.com/", None),
        ("mailto:someone@example.com", None),
    ],
)
def test_canonical_urls(given, expected):
    assert canonical(given) == expected


def test_file_names_follow_the_pages_type():
    html_kind = (".html", (".html", ".htm"))
    assert filename_for("http://h.example/docs/guide", *html_kind) == "guide.html"
    assert filename_for("http://h.example/", *html_kind) == "h.example.html"
    assert filename_for("http://h.example/a/index.htm", *html_kind) == "index.htm"
    assert filename_for("http://h.example/readme.md", ".txt", (".txt",)) == "readme.md"
