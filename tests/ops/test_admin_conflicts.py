"""A stale page never overwrites: the version the operator saw is posted back, and a job that
changed since is reported as a conflict and left exactly as it is. Bulk actions report per
job what happened, one message per outcome group."""

from __future__ import annotations

import pytest

from jobs.models import Job, JobEvent
from jobs.services.lifecycle import job_cancel, job_take_over
from jobs.services.worker import job_claim
from tests.ops.helpers import (
    JOBS,
    STALLED,
    act,
    confirm,
    messages_of,
    queued,
    ready,
    running,
    short,
    stalled,
    start_action,
)

pytestmark = pytest.mark.django_db


def test_the_list_renders_the_version_each_action_posts_back(senior):
    job = stalled()
    for url in (JOBS, STALLED):
        html = senior.get(url).content.decode()
        assert f'name="seen_version_{job.pk}" value="{job.version}"' in html


def test_an_action_from_a_stale_list_is_a_conflict_and_changes_nothing(senior):
    job = queued()
    seen = job.version
    claim = job_claim(job_id=job.pk, worker="w9")  # meanwhile a worker claimed it
    assert claim is not None
    now = Job.objects.get(pk=job.pk)
    response = act(senior, "cancel", [job], seen={job.pk: seen}, reason="too late")
    notes = messages_of(response)
    assert len(notes) == 1
    assert notes[0].startswith("Conflict: 1 job changed since you looked and was left unchanged")
    assert short(job) in notes[0] and "reload" in notes[0]
    after = Job.objects.get(pk=job.pk)
    # Cancel would still apply to a running job, but the operator decided on a queued one.
    assert (after.status, after.version, after.cancel_requested_at) == ("running", now.version, None)
    assert not JobEvent.objects.filter(job=job, actor="operator").exists()


def test_a_change_between_the_confirmation_page_and_the_confirm_is_a_conflict_too(senior):
    job = stalled()
    page = start_action(senior, "take_over", [job], url=STALLED)
    assert page.status_code == 200
    job_take_over(job_id=job.pk, actor_name="other-operator", reason="faster")  # someone else
    response = confirm(senior, page, reason="mine", url=STALLED)
    notes = messages_of(response)
    assert len(notes) == 1 and notes[0].startswith("Conflict") and short(job) in notes[0]
    events = JobEvent.objects.filter(job=job, name="take_over")
    assert list(events.values_list("actor_name", flat=True)) == ["other-operator"]


def test_a_job_that_left_the_stalled_list_is_reported_not_silently_dropped(senior):
    job = stalled()
    page = start_action(senior, "give_up", [job], url=STALLED)
    job_take_over(job_id=job.pk, actor_name="other-operator")
    notes = messages_of(confirm(senior, page, url=STALLED))
    assert len(notes) == 1 and notes[0].startswith("Conflict") and short(job) in notes[0]
    assert Job.objects.get(pk=job.pk).status == "queued"


def test_a_bulk_action_reports_each_outcome_group_with_its_jobs(senior):
    stuck = stalled()  # first: making a stalled job reaps every running one
    done = [queued(), running()]
    finished = ready()
    stale = queued()
    seen = {stale.pk: stale.version}
    job_cancel(job_id=stale.pk, actor_name="user")  # cancelled by its user meanwhile
    selection = [*done, finished, stuck, stale]
    response = act(senior, "cancel", selection, seen=seen, reason="tenant offboarded")
    notes = messages_of(response)
    assert len(notes) == 4, notes
    by_start = {n.split(" ")[0]: n for n in notes}
    assert by_start["2"].startswith("2 jobs cancelled or asked to stop:")
    assert short(done[0]) in by_start["2"] and short(done[1]) in by_start["2"]
    assert short(stale) in by_start["Conflict:"]
    skipped = [n for n in notes if n.startswith("Skipped")]
    assert any("already finished (Ready)" in n and short(finished) in n for n in skipped)
    assert any("take it over or give it up" in n and short(stuck) in n for n in skipped)
    statuses = {j.pk: Job.objects.get(pk=j.pk).status for j in selection}
    assert statuses == {
        done[0].pk: "cancelled",
        done[1].pk: "cancel_requested",
        finished.pk: "ready",
        stuck.pk: "stalled",
        stale.pk: "cancelled",
    }
    operator_events = JobEvent.objects.filter(actor="operator")
    assert sorted(operator_events.values_list("job_id", flat=True)) == sorted(j.pk for j in done)
    assert set(operator_events.values_list("actor_name", "reason")) == {("sam", "tenant offboarded")}


def test_select_all_across_pages_confirms_the_versions_shown_on_the_confirmation_page(senior):
    jobs = [queued() for _ in range(3)]
    page = senior.post(
        f"{JOBS}?status__exact=queued",
        {"action": "cancel", "index": 0, "select_across": 1, "_selected_action": [str(jobs[0].pk)]},
    )
    html = page.content.decode()
    for job in jobs:
        assert f'name="seen_version_{job.pk}" value="{job.version}"' in html
    act_response = confirm(senior, page, reason="all of them", url=f"{JOBS}?status__exact=queued")
    assert messages_of(act_response) == [
        f"3 jobs cancelled or asked to stop: {', '.join(short(j) for j in _in_page_order(page, jobs))}."
    ]


def _in_page_order(page, jobs):
    html = page.content.decode()
    return sorted(jobs, key=lambda j: html.index(str(j.pk)))


def test_an_action_from_the_job_page_returns_to_the_job_page(senior):
    job = stalled()
    page = senior.post(
        JOBS,
        {
            "action": "give_up",
            "_selected_action": [str(job.pk)],
            f"seen_version_{job.pk}": job.version,
            "next": f"/admin/jobs/job/{job.pk}/change/",
        },
    )
    response = confirm(senior, page, reason="host gone")
    assert response.redirect_chain[-1][0] == f"/admin/jobs/job/{job.pk}/change/"
    assert Job.objects.get(pk=job.pk).status == "failed"


def test_an_unsafe_next_url_is_ignored(senior):
    job = queued()
    page = senior.post(
        JOBS,
        {
            "action": "cancel",
            "_selected_action": [str(job.pk)],
            f"seen_version_{job.pk}": job.version,
            "next": "https://evil.example/",
        },
    )
    response = confirm(senior, page)
    assert response.redirect_chain[-1][0].startswith(JOBS)
