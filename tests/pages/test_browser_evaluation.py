"""The evaluation pages in a real browser (Debian's Chromium via Playwright) against a real
uvicorn server and django-q2 cluster: start two runs from a collection's evaluation page, read a
run's figures, compare the runs, and mark a search hit; screenshots for people to look at."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from documents.evaluation.models import EvaluationRun, LabelCandidate
from documents.services.collections import default_collection
from documents.services.evaluation import query_set_create, query_set_import
from jobs.models import Status
from tests.conftest import Processes, wait_for
from tests.documents.helpers import reload_job, run_until_idle
from tests.pages.browser import (
    DESKTOP,
    Platform,
    log_in,
    screenshot,
    server_env,
    start_platform,
)
from tests.pages.helpers import Member

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def platform(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[Platform]:
    processes = Processes(tmp_path_factory.mktemp("platform"))
    with django_db_blocker.unblock():
        env = server_env(str(settings.MEDIA_ROOT))
    try:
        yield start_platform(processes, env)
    finally:
        processes.stop_all()
        with django_db_blocker.unblock():
            connections.close_all()


def test_the_evaluation_pages_in_a_browser(chromium: Any, platform: Platform, alice: Member):
    ids = []
    for name, text in (
        ("harbour.txt", "The harbour master logged every fishing boat that left before dawn."),
        ("orchard.txt", "Apple trees in the orchard were pruned in late winter by the gardeners."),
        ("tea.txt", "绿茶在春天采摘，然后在锅里炒干。"),  # noqa: RUF001
    ):
        result = alice.upload(text.encode(), name)
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
        ids.append(str(result.version.document_id))
    collection = default_collection(alice.tenant)
    query_set = query_set_create(collection=collection, name="Smoke")
    lines = [
        {"query": "fishing boat dawn", "relevant": [ids[0]]},
        {"query": "apple trees pruned", "relevant": [ids[1]], "grades": [2]},
        {"query": "春天采摘", "relevant": [ids[2]]},
    ]
    query_set_import(query_set=query_set, data="\n".join(json.dumps(x) for x in lines).encode())

    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        log_in(page, platform, alice.username)
        page.goto(f"{platform.url}/collections/{collection.pk}/")
        page.get_by_role("link", name="Evaluation").click()
        for _ in range(2):
            page.get_by_role("button", name="Start a run").click()
            page.wait_for_load_state()
        runs = list(EvaluationRun.objects.filter(query_set=query_set))
        assert len(runs) == 2
        job_ids = [run.job_id for run in runs]
        wait_for(
            lambda: all(reload_job(job_id).status == Status.READY for job_id in job_ids),
            timeout=120,
            what="both runs ready",
        )
        page.reload()
        assert page.locator("svg.eval-chart polyline").count() == 3
        screenshot(page, "evaluation-collection")

        newer = max(runs, key=lambda r: r.created_at)
        page.goto(f"{platform.url}/evaluation/runs/{newer.pk}")
        figures = page.locator('[data-field="figures"]')
        assert "lexical" in figures.inner_text() and "cjk" in figures.inner_text()
        screenshot(page, "evaluation-run")
        page.get_by_role("link", name="This run against").first.click()
        assert "ties on mrr@10" in page.locator('[data-field="outcome"]').inner_text()
        screenshot(page, "evaluation-compare")

        page.goto(f"{platform.url}/search?q=fishing+boat")
        page.get_by_role("button", name="This answered my question").first.click()
        page.wait_for_load_state()
        assert "an operator will review it" in page.content()
        assert LabelCandidate.objects.filter(query="fishing boat", verdict="relevant").exists()
        screenshot(page, "search-verdict")
    finally:
        context.close()
