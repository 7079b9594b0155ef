"""The health page with a real, idle q2 cluster: its workers are live (their idle heartbeat), and
"0 jobs running" is said apart from them. Screenshot in a real Chromium."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from django.test import Client

from jobs.models import Job
from jobs.workers import live_workers
from tests.conftest import ROOT, Processes, wait_for
from tests.ops.conftest import VIEW, make_staff

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
_missing = not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None

pytestmark = [pytest.mark.cluster, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_idle_workers_of_a_real_cluster_are_live_and_no_job_runs(
    processes: Processes, subprocess_env: dict[str, str], live_server, monkeypatch
):
    processes.manage("qcluster", ["qcluster"], subprocess_env)  # Q_WORKERS=2, nothing to do
    workers = wait_for(
        lambda: (found := live_workers()) and len(found) >= 2 and found,
        timeout=60,
        what=f"two idle workers' heartbeats\n{processes.logs()}",
    )
    assert not Job.objects.exists()
    assert all(w.running == 0 for w in workers)

    user = make_staff("vera", VIEW)
    client = Client()
    client.force_login(user)
    html = client.get("/admin/jobs/job/health/").content.decode()
    assert "No live worker" not in html
    assert "idle or busy; 0 jobs running" in html
    for worker in workers:
        assert worker.name in html

    if _missing:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail("REQUIRE_BROWSER=1 but Chromium or Playwright is missing")
        return
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    session = client.cookies["sessionid"].value
    shots = ROOT / "test-artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for width, name in ((1400, "ops-health-idle-desktop.png"), (390, "ops-health-idle-phone.png")):
                context = browser.new_context(viewport={"width": width, "height": 900})
                context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
                page = context.new_page()
                page.goto(live_server.url + "/admin/jobs/job/health/")
                tile = page.locator(".jobs-tile", has_text="Live workers")
                assert "0 jobs running" in tile.inner_text()
                page.screenshot(path=str(shots / name), full_page=True)
                context.close()
        finally:
            browser.close()
