"""The pages in a real browser (Debian's Chromium via Playwright) against a real web server
and a real django-q2 cluster, both separate processes on this test's database.

Each test also proves the page never reloaded: it plants ``window.__marker`` after the page
loaded, and a reload would wipe it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from documents.models import Document
from tests.conftest import Processes
from tests.documents.files import encrypted_pdf
from tests.pages.browser import (
    DESKTOP,
    Platform,
    log_in,
    screenshot,
    server_env,
    start_platform,
    upload_through_form,
)
from tests.pages.helpers import Member, job_id_of, scanned_pages_pdf

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LIVE = 60_000  # ms: how long a page may take to reach a state through live updates
HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture(scope="module")
def platform(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[Platform]:
    """The web server and a q2 cluster for the module: starting them per test would double its time.
    Each test still gets a fresh database (transactional_db) and logs in again."""
    processes = Processes(tmp_path_factory.mktemp("platform"))
    with django_db_blocker.unblock():
        env = server_env(str(settings.MEDIA_ROOT))
    try:
        yield start_platform(processes, env)
    finally:
        processes.stop_all()
        with django_db_blocker.unblock():
            connections.close_all()


@pytest.fixture
def page(chromium: Any, platform: Platform, alice: Member) -> Iterator[Any]:
    """A logged-in page; its dialogs (there must be none) are recorded in ``page.dialogs``."""
    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, platform, alice.username)
    yield page
    context.close()  # ends the page's SSE stream before the next test's database flush


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def field(page: Any, name: str) -> Any:
    return page.locator(f'[data-field="{name}"]')


def plant_marker(page: Any) -> None:
    page.evaluate("window.__marker = 'same page'")


def assert_not_reloaded(page: Any) -> None:
    assert page.evaluate("window.__marker") == "same page", "the page was reloaded"


def record_states(page: Any) -> None:
    """Keep every text the state badge shows, however briefly (test-side instrumentation)."""
    page.evaluate(
        """() => {
          const badge = document.querySelector('[data-field="state"]');
          window.__states = [badge.textContent];
          new MutationObserver(() => window.__states.push(badge.textContent))
            .observe(badge, {childList: true, characterData: true, subtree: true});
        }"""
    )


def test_an_upload_goes_live_to_searchable_without_a_reload(page, platform, alice):
    upload_through_form(page, "scan.pdf", scanned_pages_pdf(3), title="Scanned minutes")
    plant_marker(page)
    assert field(page, "state").inner_text() != "Ready", "the job finished before the page could follow it"

    expect(field(page, "searchable-since")).to_contain_text("Searchable since", timeout=LIVE)
    expect(field(page, "state")).to_have_text("Ready")
    assert_not_reloaded(page)
    states = page.locator(".step").evaluate_all("steps => steps.map(s => s.dataset.state)")
    assert states == ["done", "done", "done", "done", "done"]
    expect(field(page, "percent")).to_have_text("100%")
    expect(field(page, "stage-line")).to_be_hidden()
    expect(page.locator('form[data-action="cancel"]')).to_be_hidden()
    expect(field(page, "announce")).to_have_text("Status: Ready")
    expect(page.locator("tr[data-job] [data-role]")).to_have_text("Published")
    expect(field(page, "connection")).to_be_hidden()  # finished: the stream is closed
    screenshot(page, "document-ready")

    # The page's box searches this document (document_ids rides along to /search).
    page.get_by_label("Search this document").fill("cobalt harbor")
    page.get_by_label("Search this document").press("Enter")
    assert "document_ids=" in page.url
    expect(page.locator(".result h3")).to_have_text("Scanned minutes")
    expect(page.locator(".snippet mark").first).to_have_text(re.compile("cobalt", re.IGNORECASE))

    page.goto(f"{platform.url}/")
    expect(page.locator("table.documents tbody tr")).to_have_count(1)
    screenshot(page, "documents-list")


def test_the_documents_list_follows_a_document_in_progress_to_ready_without_a_reload(page, platform, alice):
    alice.upload(scanned_pages_pdf(3), "scan.pdf", "Scanned minutes")
    page.goto(f"{platform.url}/")
    plant_marker(page)
    row = page.locator("table.documents tbody tr")
    expect(row).to_have_count(1)
    assert row.get_attribute("data-status") != "ready", "the job finished before the page could follow it"

    expect(row.locator(".badge")).to_have_text("Ready", timeout=LIVE)
    expect(row.locator(".percent")).to_have_text("100%")
    expect(row).to_contain_text("Version 1")  # the published column came along
    assert_not_reloaded(page)
    # Every row is finished: the page stops reading the list.
    page.wait_for_timeout(500)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.wait_for_timeout(5_000)  # more than one polling period
    assert requests == []


def test_cancel_from_the_page_shows_stopping_then_cancelled(page, platform, alice):
    result = alice.upload(scanned_pages_pdf(12), "long-scan.pdf", "Long scanned archive")
    page.goto(f"{platform.url}/documents/{result.document.pk}/")
    plant_marker(page)
    expect(field(page, "counts")).to_contain_text(re.compile(r"[1-9]\d* of 12 pages"), timeout=LIVE)
    expect(field(page, "state")).to_have_text("Recognising text")
    screenshot(page, "document-running")
    record_states(page)

    page.get_by_role("button", name="Cancel processing").click()
    page.get_by_role("button", name="Yes, stop processing").click()
    expect(field(page, "state")).to_have_text("Cancelled", timeout=LIVE)
    seen = page.evaluate("window.__states")
    assert "Stopping…" in seen, seen
    assert seen.index("Stopping…") < seen.index("Cancelled")
    expect(field(page, "stopping")).to_be_hidden()
    expect(page.get_by_role("button", name="Cancel processing")).to_be_hidden()
    assert page.locator('.step[data-stage="ocr"]').get_attribute("data-state") == "cancelled"
    # Until when the file stays for processing again appears as the job ends, not after a reload.
    expect(field(page, "bytes-kept")).to_be_visible()
    expect(field(page, "bytes-kept")).to_contain_text("The uploaded file of this version is kept until ")
    expect(field(page, "bytes-kept").locator("time")).to_have_count(1)
    assert_not_reloaded(page)
    assert Document.objects.get(pk=result.document.pk).published_version is None


def test_cancel_asks_first_and_a_cancelled_version_is_processed_again_from_its_file(page, platform, alice):
    result = alice.upload(scanned_pages_pdf(12), "long-scan.pdf", "Scan to process again")
    page.goto(f"{platform.url}/documents/{result.document.pk}/")
    plant_marker(page)
    expect(field(page, "counts")).to_contain_text(re.compile(r"[1-9]\d* of 12 pages"), timeout=LIVE)

    # The first click only asks; "Keep processing" takes the question back.
    page.get_by_role("button", name="Cancel processing").click()
    expect(page.get_by_text("Stop processing? The work done so far is discarded.")).to_be_visible()
    screenshot(page, "document-cancel-question")
    page.get_by_role("button", name="Keep processing").click()
    expect(page.get_by_role("button", name="Yes, stop processing")).to_be_hidden()
    assert field(page, "state").text_content() != "Cancelled"

    page.get_by_role("button", name="Cancel processing").click()
    page.get_by_role("button", name="Yes, stop processing").click()
    expect(field(page, "state")).to_have_text("Cancelled", timeout=LIVE)
    assert_not_reloaded(page)
    again = page.get_by_role("button", name="Process again")
    expect(again).to_be_visible()
    expect(
        page.get_by_text("Uses the file you uploaded; processing starts over as a new version.")
    ).to_be_visible()
    screenshot(page, "document-cancelled-process-again")

    again.click()  # a plain form: the page reloads onto version 2
    expect(page.get_by_text("Processing again as version 2, from the file you uploaded.")).to_be_visible()
    expect(page.locator("#status-heading")).to_have_text("Version 2")
    expect(field(page, "counts")).to_contain_text(re.compile(r"[1-9]\d* of 12 pages"), timeout=LIVE)
    expect(again).to_be_hidden()
    assert page.locator("tr[data-job]").count() == 2  # version 1 stays in the history
    versions = list(result.document.versions.order_by("number"))
    assert [v.number for v in versions] == [1, 2] and versions[0].sha256 == versions[1].sha256
    # End the second run sooner.
    page.get_by_role("button", name="Cancel processing").click()
    page.get_by_role("button", name="Yes, stop processing").click()
    expect(field(page, "state")).to_have_text("Cancelled", timeout=LIVE)
    assert page.dialogs == []


def test_when_the_stream_dies_the_page_polls_and_still_ends_in_the_right_state(page, platform, alice):
    result = alice.upload(scanned_pages_pdf(8), "scan.pdf", "Polled scan")
    polls: list[int] = []
    page.on(
        "response",
        lambda r: polls.append(r.status) if r.url.endswith(f"/jobs/{job_id_of(result)}") else None,
    )
    page.goto(f"{platform.url}/documents/{result.document.pk}/")
    plant_marker(page)
    expect(field(page, "connection")).to_have_text("Live")
    expect(field(page, "counts")).to_contain_text("of 8 pages", timeout=LIVE)

    # Every new stream is refused from now on; the open one dies with the server.
    page.route("**/events", lambda route: route.abort())
    streams: list[int] = []
    page.on("response", lambda r: streams.append(r.status) if r.url.endswith("/events") else None)
    platform.kill_web()
    expect(field(page, "connection")).to_have_text("Connection lost: checking every few seconds")
    platform.start_web()

    expect(field(page, "searchable-since")).to_contain_text("Searchable since", timeout=LIVE)
    expect(field(page, "state")).to_have_text("Ready")
    assert 200 in polls, "the page never read the status endpoint"
    assert streams == [], "a stream got through: the page was not left to polling"
    assert_not_reloaded(page)
    assert page.locator(".step").evaluate_all("s => s.map(x => x.dataset.state)") == ["done"] * 5


def test_a_stream_that_comes_back_rereads_the_status_first(page, platform, alice):
    result = alice.upload(scanned_pages_pdf(16), "scan.pdf", "Reconnected scan")
    status_url = f"/api/documents/{result.document.pk}/jobs/{job_id_of(result)}"
    opened: list[float] = []  # when a stream answered 200
    reads: list[float] = []  # when the page asked the status endpoint
    page.on("response", lambda r: opened.append(time.monotonic()) if r.url.endswith("/events") else None)
    page.on("request", lambda r: reads.append(time.monotonic()) if r.url.endswith(status_url) else None)
    page.goto(f"{platform.url}/documents/{result.document.pk}/")
    plant_marker(page)
    expect(field(page, "counts")).to_contain_text("of 16 pages", timeout=LIVE)

    platform.kill_web()
    expect(field(page, "connection")).to_have_text("Connection lost: checking every few seconds")
    streams_before = len(opened)
    platform.start_web()
    expect(field(page, "connection")).to_have_text("Live", timeout=LIVE)  # the browser reconnected
    assert len(opened) > streams_before
    reopened = opened[-1]
    # Polls come every 3 s; the read that follows the reopened stream comes at once.
    assert any(0 <= read - reopened < 0.5 for read in reads), (reopened, reads)
    # The page is fully working again: its cancel goes through (and ends the test sooner).
    page.get_by_role("button", name="Cancel processing").click()
    page.get_by_role("button", name="Yes, stop processing").click()
    expect(field(page, "state")).to_have_text("Cancelled", timeout=LIVE)
    assert_not_reloaded(page)


def test_a_failed_upload_shows_its_message_and_what_to_do(page, platform):
    upload_through_form(page, "locked.pdf", encrypted_pdf(), title="Locked report")
    expect(field(page, "state")).to_have_text("Parsing failed", timeout=LIVE)
    expect(field(page, "error-message")).to_have_text(
        "The file is password-protected. Remove the password and upload it again."
    )
    expect(field(page, "error-action")).to_have_text("Upload a corrected copy of the file.")
    expect(page.locator("#reupload_file")).to_be_visible()
    expect(page.get_by_role("button", name="Upload corrected copy")).to_be_visible()
    expect(page.locator("#new-version")).to_be_hidden()
    expect(page.get_by_role("button", name="Retry")).to_be_hidden()
    assert page.locator('.step[data-stage="parsing"]').get_attribute("data-state") == "failed"
    screenshot(page, "document-failed")

    # The same page in Chinese, through the language switcher.
    page.get_by_label("Language").select_option("zh-hans")
    page.get_by_role("button", name="Change").click()
    expect(field(page, "state")).to_have_text("解析失败")
    expect(field(page, "error-message")).to_have_text("文件受密码保护。请移除密码后重新上传。")
    expect(page.get_by_role("button", name="上传修正后的副本")).to_be_visible()
    screenshot(page, "document-failed-zh")


def test_html_in_a_title_and_file_name_is_shown_as_text(page, platform):
    name = "<img src=x onerror=alert(3)>.txt"
    upload_through_form(page, name, b"Plain harbor notes.\n", title=HOSTILE, mime="text/plain")
    expect(page.locator("h1.title")).to_have_text(HOSTILE)
    expect(page.locator("td.filename")).to_have_text(name)
    expect(field(page, "state")).to_have_text("Ready", timeout=LIVE)
    page.goto(f"{platform.url}/")
    expect(page.get_by_role("link", name=HOSTILE)).to_be_visible()
    # Every image has loaded or failed by now, so a would-be onerror handler has had its moment.
    page.wait_for_function("Array.from(document.images).every((image) => image.complete)")
    assert page.dialogs == []
    assert page.locator("main img, main script").count() == 0
