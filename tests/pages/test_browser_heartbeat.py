"""A page that no unit finished on lately says the worker is still working, from its heartbeat
(real Chromium, the real web server; the worker is this test, so the quiet spell is certain: no
cluster runs here to finish the job first)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from jobs.services.worker import job_claim, job_heartbeat, job_report_progress
from tests.conftest import Processes
from tests.documents.files import text_pdf
from tests.pages.browser import (
    DESKTOP,
    Platform,
    free_port,
    log_in,
    screenshot,
    server_env,
)
from tests.pages.helpers import Member

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

QUIET = 30_000  # ms: more than the page's 10 s quiet threshold plus one re-read


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


def test_a_quiet_running_page_shows_the_workers_last_heartbeat(chromium: Any, web: Platform, alice: Member):
    from playwright.sync_api import expect

    result = alice.upload(text_pdf(), "slow.pdf", "A slow document")
    assert result.job is not None
    claim = job_claim(job_id=result.job.pk, worker="slow-worker")
    assert claim is not None
    job_report_progress(job_id=claim.job_id, token=claim.token, done=3, total=40)

    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    try:
        page = context.new_page()
        log_in(page, web, alice.username)
        page.goto(f"{web.url}/documents/{result.document.pk}/")
        line = page.locator('[data-field="heartbeat"]')
        expect(line).to_be_hidden()  # a unit finished just now
        # No page finishes: after the quiet spell the line says how old the last heartbeat is.
        expect(line).to_have_text(
            re.compile(r"^Still working · last heartbeat [1-9]\d s ago$"), timeout=QUIET
        )
        expect(page.locator('[data-field="counts"]')).to_have_text("3 of 40 pages")
        screenshot(page, "document-still-working")
        # A new heartbeat (no event, no progress) reaches the page through its re-read, which
        # comes at most ~11 s later (the page re-reads every 10 s while quiet; the first re-read
        # may have been the one that showed the line). The old heartbeat would be 20 s old by then.
        with page.expect_response(lambda r: r.url.endswith(f"/jobs/{claim.job_id}"), timeout=QUIET):
            assert job_heartbeat(job_id=claim.job_id, token=claim.token).alive
        expect(line).to_have_text(re.compile(r"^Still working · last heartbeat (\d|1[0-4]) s ago$"))
        # Progress again: the line goes away.
        job_report_progress(job_id=claim.job_id, token=claim.token, done=4, total=40)
        expect(page.locator('[data-field="counts"]')).to_have_text("4 of 40 pages", timeout=QUIET)
        expect(line).to_be_hidden()
    finally:
        context.close()
