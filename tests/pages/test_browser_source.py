"""The source page follows a running sync through the source's event stream (real Chromium, the
real web server; the sync's stages run in this test, so each step is certain): the line moves
from queued to the apply stage's progress and ends at "ready" with the counts, without a reload.
A failed item and a failed sync are drawn as they come, in the reader's language, again without a
reload. Screenshots: the page mid-sync and after a sync with a failed file, and the admin's
sources."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.utils import translation

from documents.sources.models import SourceItem
from documents.sources.services import source_update, sync_start
from jobs.executor import run_stage
from jobs.services.worker import job_claim
from tests.conftest import Processes
from tests.documents.helpers import run_until_idle
from tests.documents.source_helpers import folder_source, write
from tests.pages.browser import DESKTOP, SCREENSHOTS, Platform, free_port, log_in, screenshot, server_env
from tests.pages.helpers import PASSWORD, Member

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

WAIT = 20_000  # ms


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[Platform]:
    """The web server alone: no workers."""
    processes = Processes(tmp_path_factory.mktemp("web"))
    with django_db_blocker.unblock():
        env = server_env(str(settings.MEDIA_ROOT))
    platform = Platform(processes, env, free_port())
    try:
        platform.start_web()
        yield platform
    finally:
        processes.stop_all()
        with django_db_blocker.unblock():
            connections.close_all()


def test_the_source_page_follows_a_sync_to_ready_without_reloading(
    chromium: Any, web: Platform, alice: Member, tmp_path: Path, settings: Any
) -> None:
    from playwright.sync_api import expect

    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    for n in range(6):
        write(tmp_path / "handbook", f"page-{n}.txt", f"Handbook page {n} is about the word plover{n}.\n")
    source = folder_source(alice.tenant, tmp_path / "handbook")
    job_id = sync_start(source=source).sync.job_id

    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    try:
        page = context.new_page()
        log_in(page, web, alice.username)
        page.goto(f"{web.url}/sources/{source.pk}/")
        page.evaluate("window.loadedOnce = true")  # gone if the page loads again
        line = page.locator('[data-field="sync-state"]')
        expect(line.locator(".badge")).to_have_class(re.compile("state-queued"))

        claim = job_claim(job_id=job_id, worker="test-worker")
        while claim is not None and claim.job.stage != "apply":
            claim = run_stage(claim)  # list, then compare: 30 % of the sync's weight
        expect(line).to_have_attribute("data-state", "apply", timeout=WAIT)
        expect(line).to_contain_text("30 % done", timeout=WAIT)
        expect(page.locator('[data-count="new"]')).to_have_text("6")
        screenshot(page, "source-syncing")

        assert claim is not None
        run_stage(claim)  # apply: the sync is ready
        expect(line).to_have_attribute("data-state", "ready", timeout=WAIT)
        expect(line.locator(".badge")).to_have_class(re.compile("state-ready"))
        expect(line.locator('[data-field="sync-progress"]')).to_have_text("")
        assert page.evaluate("window.loadedOnce") is True  # the same page: no reload

        # A later sync with an empty file: the page after it, with its counts and failed item.
        write(tmp_path / "handbook", "page-2.txt", "Page two, rewritten: the word avocet.\n")
        (tmp_path / "handbook" / "empty.txt").write_bytes(b"")
        run_until_idle(sync_start(source=source).sync.job_id)
        source_update(source=source, schedule_cron="*/30 * * * *")
        page.reload()
        expect(page.locator('[data-field="failures"]')).to_contain_text("empty.txt")
        expect(page.locator('[data-count="changed"]')).to_have_text("1")
        screenshot(page, "source-after-sync")

        # The operators' list of every workspace's sources.
        get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
        admin = context.new_page()
        admin.goto(f"{web.url}/admin/login/")
        admin.fill("#id_username", "operator")
        admin.fill("#id_password", PASSWORD)
        admin.click("input[type=submit]")
        admin.goto(f"{web.url}/admin/documents/source/")
        expect(admin.locator("#result_list")).to_contain_text("Handbook")
        expect(admin.locator("#result_list")).to_contain_text("*/30 * * * *")
        admin.click("#toggle-nav-sidebar")  # the list's every column in view
        admin.set_viewport_size({"width": 1920, "height": 600})
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        admin.screenshot(path=str(SCREENSHOTS / "admin-sources-desktop.png"), full_page=True)
    finally:
        context.close()


def test_the_source_page_shows_failures_live_in_its_language_without_reloading(
    chromium: Any, web: Platform, alice: Member, tmp_path: Path, settings: Any
) -> None:
    from playwright.sync_api import expect

    settings.SOURCES_ALLOWED_ROOTS = [str(tmp_path)]
    write(tmp_path / "handbook", "page.txt", "The handbook's page is about the word plover.\n")
    (tmp_path / "handbook" / "empty.txt").write_bytes(b"")
    source = folder_source(alice.tenant, tmp_path / "handbook")
    job_id = sync_start(source=source).sync.job_id

    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    try:
        page = context.new_page()
        log_in(page, web, alice.username)
        # The reader's language from here on: Simplified Chinese (the pages' language switch).
        context.add_cookies([{"name": settings.LANGUAGE_COOKIE_NAME, "value": "zh-hans", "url": web.url}])
        page.goto(f"{web.url}/sources/{source.pk}/")
        page.evaluate("window.loadedOnce = true")  # gone if the page loads again
        line = page.locator('[data-field="sync-state"]')
        expect(line.locator(".badge")).to_have_class(re.compile("state-queued"))
        failures = page.locator('[data-field="failures"]')
        expect(failures).to_be_hidden()

        run_until_idle(job_id)  # the empty file fails; the sync itself is ready
        expect(line).to_have_attribute("data-state", "ready", timeout=WAIT)
        with translation.override("zh-hans"):
            empty = translation.gettext(SourceItem.objects.get(key="empty.txt").error_message)
        expect(failures).to_be_visible(timeout=WAIT)
        expect(failures.locator("tbody tr")).to_have_count(1)
        expect(failures).to_contain_text("empty.txt")
        expect(failures).to_contain_text(f"{empty} (file_empty)")
        expect(page.locator('[data-count="failed"]')).to_have_text("1")
        assert page.evaluate("window.loadedOnce") is True  # the same page: no reload

        # A sync that fails as a whole (its folder gone): its cause's words on the line, live.
        job_id = sync_start(source=source).sync.job_id
        page.reload()
        page.evaluate("window.loadedOnce = true")
        expect(line).to_have_attribute("data-state", "queued", timeout=WAIT)
        shutil.rmtree(tmp_path / "handbook")
        job = run_until_idle(job_id)
        assert job.status == "failed"
        with translation.override("zh-hans"):
            cause = translation.gettext(job.error_message)
        assert cause != job.error_message
        expect(line.locator('[data-field="sync-error"]')).to_have_text(f"\u2014 {cause}", timeout=WAIT)
        expect(line.locator(".badge")).to_have_class(re.compile("failed"))
        assert page.evaluate("window.loadedOnce") is True
        screenshot(page, "source-failed-live")
    finally:
        context.close()
