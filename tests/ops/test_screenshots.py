"""Screenshots of the operator console in a real Chromium: the health page, the stalled list, the
job list and a failed job's page, on a day of realistic activity made through the services.

Written to ``test-artifacts/screenshots/ops-*.png`` for people to look at. Skipped when
``/usr/bin/chromium`` (or Playwright) is missing, unless ``REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import importlib.util
import os
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from jobs.services.lifecycle import job_cancel
from jobs.services.reaper import reap
from jobs.services.worker import job_claim
from tests.conftest import ROOT
from tests.jobs.helpers import new_job
from tests.ops.conftest import FORCE, OPERATE, TAKEOVER, VIEW, Clock, make_staff
from tests.ops.helpers import complete, fail, tenant

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "test-artifacts" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
]
_missing = not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        _missing and os.environ.get("REQUIRE_BROWSER") != "1", reason="needs /usr/bin/chromium and playwright"
    ),
]

READY_PER_HOUR = [1, 1, 0, 1, 2, 2, 3, 4, 5, 4, 3, 4, 6, 5, 4, 3, 3, 3, 4, 4, 3, 2, 2, 2]
FAILED_PER_HOUR = [0, 0, 0, 0, 1, 0, 0, 1, 2, 0, 0, 1, 0, 3, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]


def claimed(clock: Clock, tenant_key: str, worker: str):
    claim = job_claim(job_id=new_job(tenant=tenant_key).pk, worker=worker)
    assert claim is not None
    return claim


def a_day_of_activity() -> str:
    """A day of jobs through the services, with the clock moved back; returns a failed job's id."""
    tenant("acme", max_running_jobs=3, max_queued_jobs=20)
    tenant("globex", max_running_jobs=2, max_queued_jobs=5)
    tenants = ["acme", "globex", "initech"]
    clock = Clock()
    real_now = clock.now
    failed_id = ""
    with mock.patch("django.utils.timezone.now", clock):
        for hour, (ready, failed) in enumerate(zip(READY_PER_HOUR, FAILED_PER_HOUR, strict=True)):
            clock.at(real_now - timedelta(hours=24 - hour, minutes=-7))
            for i in range(ready):
                job = new_job(tenant=tenants[i % 3])
                clock.advance(2 + i % 4)
                claim = job_claim(job_id=job.pk, worker=f"ingest-{1 + i % 2}:42{hour:02d}")
                clock.advance(5 + 3 * (i % 5))
                complete(claim)
            for i in range(failed):
                claim = claimed(clock, tenants[i % 2], "ingest-1:4100")
                clock.advance(4)
                failed_id = str(fail(claim, "corrupt_input" if i % 2 == 0 else "embedding_auth").pk)
            if hour % 5 == 0:
                retried = fail(claimed(clock, "initech", "ingest-2:4200"), "internal_error")
                clock.advance(600)  # past its backoff: the retry goes through
                complete(job_claim(job_id=retried.pk, worker="ingest-2:4200"))
        clock.at(real_now - timedelta(minutes=40))
        claimed(clock, "acme", "ingest-7:7001")
        claimed(clock, "globex", "ingest-8:8008")
        clock.at(real_now - timedelta(minutes=30))
        reap()  # two workers vanished: their non-resumable stage waits for an operator
        clock.at(real_now - timedelta(minutes=12))
        for _ in range(5):
            new_job(tenant="acme")
    # Work in progress right now, on the real clock: live workers, leases with time left.
    claimed(clock, "acme", "ingest-1:4321")
    claimed(clock, "acme", "ingest-2:4322")
    claimed(clock, "acme", "ingest-2:4322")
    job_cancel(job_id=claimed(clock, "globex", "ingest-1:4321").job_id, actor_name="dana")
    return failed_id


def test_screenshots_of_the_operator_console(live_server, monkeypatch, settings):
    settings.JOBS_LEASE_SECONDS = 120  # the browser takes a few seconds: workers stay "live"
    failed_id = a_day_of_activity()
    user = make_staff("sam", VIEW, OPERATE, TAKEOVER, FORCE)
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert timezone.now()  # the real clock again

    # Playwright's sync API runs an event loop in this thread; the ORM work is done above.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    pages = {
        "ops-health.png": "/admin/jobs/job/health/",
        "ops-stalled.png": "/admin/jobs/stalledjob/",
        "ops-jobs.png": "/admin/jobs/job/",
        "ops-job-page.png": f"/admin/jobs/job/{failed_id}/change/",
        "ops-index.png": "/admin/",
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            context = browser.new_context(viewport={"width": 1920, "height": 1080})
            context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
            page = context.new_page()
            for name, path in pages.items():
                response = page.goto(live_server.url + path)
                assert response is not None and response.status == 200, (path, response and response.status)
                assert "Log in" not in page.title()
                page.screenshot(path=str(SHOTS / name), full_page=True)
            # The confirmation page of a bulk take-over from the stalled list.
            page.goto(live_server.url + "/admin/jobs/stalledjob/")
            page.check("#action-toggle")
            page.select_option("select[name=action]", "take_over")
            page.click("button[name=index]")
            page.wait_for_selector("textarea[name=reason]")
            page.screenshot(path=str(SHOTS / "ops-confirm.png"), full_page=True)
        finally:
            browser.close()
    for name in [*pages, "ops-confirm.png"]:
        assert (SHOTS / name).stat().st_size > 10_000, name
