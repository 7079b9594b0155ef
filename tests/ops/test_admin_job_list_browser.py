"""The job list in a real Chromium at 1400 px: document subjects read as titles (linked) and
versions, and the list fits without horizontal scrolling. Screenshots at 1400 and 390 px."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from documents.models import Document, DocumentVersion
from jobs.services.worker import job_claim
from tests.conftest import ROOT
from tests.ops.conftest import FORCE, OPERATE, TAKEOVER, VIEW, make_staff
from tests.ops.helpers import document_job, fail

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
_missing = not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        _missing and os.environ.get("REQUIRE_BROWSER") != "1", reason="needs /usr/bin/chromium and playwright"
    ),
]

TITLES = [
    "Quarterly report of the northern harbour authority, with annexes and tables",
    "Lighthouse maintenance log 2024",
    "扫描的合同",
]


def test_the_job_list_shows_titles_and_fits_at_1400_px(live_server, monkeypatch, settings):
    settings.JOBS_LEASE_SECONDS = 120
    for i, title in enumerate(TITLES):
        job = document_job(text=f"Note number {i}.")
        Document.objects.filter(pk=DocumentVersion.objects.get(job_id=job.pk).document_id).update(title=title)
        claim = job_claim(job_id=job.pk, worker=f"ingest-worker-{i}.example.internal:4{i}21")
        if i == 2:
            assert claim is not None
            fail(claim, "corrupt_input")
    user = make_staff("sam", VIEW, OPERATE, TAKEOVER, FORCE)
    # An operator of every workspace: the titles of documents come with view_all_documents.
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="documents", codename="view_all_documents")
    )
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    shots = ROOT / "test-artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for width, name in ((1400, "ops-jobs-1400.png"), (390, "ops-jobs-phone.png")):
                context = browser.new_context(viewport={"width": width, "height": 900})
                context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
                page = context.new_page()
                page.goto(live_server.url + "/admin/jobs/job/")
                links = page.locator("#result_list a.jobs-subject")
                assert sorted(links.all_inner_texts()) == sorted(f"v1 · {t}" for t in TITLES)
                if width == 1400:
                    # Neither the page nor the list's own scroll box scrolls sideways.
                    overflow = page.evaluate(
                        """() => Math.max(
                          document.documentElement.scrollWidth - document.documentElement.clientWidth,
                          ...[...document.querySelectorAll('.results, #changelist, #result_list')]
                            .map(e => e.scrollWidth - e.clientWidth))"""
                    )
                    assert overflow <= 0, f"the list scrolls sideways by {overflow} px at 1400 px"
                page.screenshot(path=str(shots / name), full_page=True)
                context.close()
        finally:
            browser.close()
