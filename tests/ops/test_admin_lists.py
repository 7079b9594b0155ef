"""The job list (columns, filters, search) and the stalled list (only stalled jobs, oldest first,
with what an operator needs to decide)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.services.reaper import reap
from jobs.services.worker import job_save_checkpoint
from tests.jobs import helpers as jh
from tests.jobs.helpers import new_job
from tests.ops.helpers import JOBS, STALLED, STATES, queued, running, short, stalled

pytestmark = pytest.mark.django_db


def listed(client, url: str) -> list[Job]:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return list(response.context["cl"].result_list)


def row_of(html: str, job: Job) -> str:
    at = html.index(str(job.pk))
    return html[html.rfind("<tr", 0, at) : html.index("</tr>", at)]


def ids(jobs) -> set:
    return {j.pk for j in jobs}


def test_the_list_shows_state_lease_worker_and_error_columns(viewer):
    stuck = stalled(worker="host-a:41")
    live = running(worker="host-b:7")
    broken = STATES["failed_permanent"]()
    html = viewer.get(JOBS).content.decode()
    for header in ("status / stage", "tenant", "subject", "age", "lease left", "worker"):
        assert f">{header}<" in html.lower() or f">{header}</a>" in html.lower(), header
    assert short(stuck) in html and "host-a:41 (lost)" in html
    assert "host-b:7" in row_of(html, live) and "expired" not in row_of(html, live)
    assert "parse_failed" not in html and "prepare_failed" in html  # the toy's state word
    assert f'name="seen_version_{live.pk}" value="{live.version}"' in row_of(html, live)
    assert "prepare" in row_of(html, live)  # the stage, in the status column
    assert "corrupt_input" in html and short(broken) in html


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("status__exact=stalled", {"stalled"}),
        ("stalled=yes", {"stalled"}),
        ("stalled=no", {"queued", "running", "failed"}),
        ("error_code=corrupt_input", {"failed"}),
        ("error_code=worker_lost", {"stalled"}),
        ("error_code=none", {"queued", "running"}),
        ("stage=prepare", {"queued", "running", "stalled", "failed"}),
        ("stage=pages", set()),
    ],
)
def test_filters(viewer, query, expect):
    jobs = {
        "stalled": stalled(),
        "queued": queued(),
        "running": running(),
        "failed": STATES["failed_permanent"](),
    }
    assert ids(listed(viewer, f"{JOBS}?{query}")) == {jobs[name].pk for name in expect}


def test_tenant_filter_and_search_by_tenant(viewer):
    mine, theirs = queued(), new_job(tenant="globex")
    assert ids(listed(viewer, f"{JOBS}?tenant=globex")) == {theirs.pk}
    assert ids(listed(viewer, f"{JOBS}?q=globex")) == {theirs.pk}
    assert mine.pk in ids(listed(viewer, f"{JOBS}?tenant=acme"))


def test_search_by_job_id_its_short_form_and_document_id(viewer):
    job, other = queued(), queued()
    assert ids(listed(viewer, f"{JOBS}?q={job.pk}")) == {job.pk}
    assert ids(listed(viewer, f"{JOBS}?q={short(job)}")) == {job.pk}
    assert ids(listed(viewer, f"{JOBS}?q={job.subject_id}")) == {job.pk}
    assert ids(listed(viewer, f"{JOBS}?q=no-such-thing")) == set()
    assert other.pk not in ids(listed(viewer, f"{JOBS}?q={short(job)}"))


def test_running_longer_than_looks_at_the_current_attempt(viewer, clock):
    old = running()
    clock.advance(20 * 60)
    fresh = running()
    assert ids(listed(viewer, f"{JOBS}?running_for=15m")) == {old.pk}
    assert ids(listed(viewer, f"{JOBS}?running_for=5m")) == {old.pk}
    clock.advance(60 * 60)
    assert ids(listed(viewer, f"{JOBS}?running_for=1h")) == {old.pk, fresh.pk}


def test_queued_longer_than(viewer, clock):
    waiting = queued()
    clock.advance(2 * 3600)
    new = queued()
    running()  # not queued at all
    assert ids(listed(viewer, f"{JOBS}?queued_for=1h")) == {waiting.pk}
    assert ids(listed(viewer, f"{JOBS}?queued_for=5m")) == {waiting.pk}
    clock.advance(600)
    assert ids(listed(viewer, f"{JOBS}?queued_for=5m")) == {waiting.pk, new.pk}


def test_the_stalled_list_holds_only_stalled_jobs_oldest_first(viewer, clock):
    first = stalled(worker="host-a:1")
    clock.advance(3600)
    second = stalled(worker="host-b:2")
    queued()
    rows = listed(viewer, STALLED)
    assert [j.pk for j in rows] == [first.pk, second.pk]


def test_the_stalled_list_shows_heartbeat_lost_worker_stage_attempts_and_checkpoint(viewer):
    claim = jh.running(worker="host-d:3")
    # The checkpoint the lost worker reached (a fenced write while it held the lease).
    job_save_checkpoint(job_id=claim.job_id, token=claim.token, checkpoint={"next": 7, "engine": "x"})
    reap(now=timezone.now() + timedelta(hours=1))
    job = jh.reload(claim)
    html = viewer.get(STALLED).content.decode()
    row = row_of(html, job)
    assert "host-d:3" in row and "prepare" in row and "ago" in row
    assert "1 (1 in all)" in row
    assert "next=7, engine=x" in row
    assert "take over, give up" in row
    assert f'href="/admin/jobs/job/{job.pk}/change/"' in html


def test_the_job_list_links_to_the_health_page_and_the_stalled_list(viewer):
    html = viewer.get(JOBS).content.decode()
    assert 'href="/admin/jobs/job/health/"' in html and 'href="/admin/jobs/stalledjob/"' in html
    index = viewer.get("/admin/").content.decode()
    assert 'href="/admin/jobs/job/health/"' in index and 'href="/admin/jobs/stalledjob/"' in index


def test_the_stalled_list_is_not_a_place_to_edit(viewer, senior):
    job = stalled()
    assert viewer.get(f"{STALLED}{job.pk}/change/")["Location"] == f"/admin/jobs/job/{job.pk}/change/"
    assert senior.get(f"{STALLED}add/").status_code == 403
