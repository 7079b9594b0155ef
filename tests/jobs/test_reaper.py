"""The reaper's decisions, each an event: stall, recover, give up, leave, cancel, dispatch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import OrmQ

from jobs.models import Job, JobEvent, Status, TimingBucket
from jobs.services.lifecycle import job_cancel
from jobs.services.reaper import reap
from jobs.services.worker import job_claim, job_complete_stage, job_heartbeat
from jobs.timings import ALL_TIME, timing_record
from tests.jobs.helpers import new_job, reload, running

pytestmark = pytest.mark.django_db

LATER = timedelta(minutes=5)


def in_pages_stage(worker: str = "w1"):
    """A claim on the resumable ``pages`` stage."""
    return job_complete_stage(claim=running(worker=worker), continue_inline=True)


def test_a_live_lease_is_left_alone():
    claim = running()
    report = reap()
    assert report.stalled == []
    assert reload(claim).status == Status.RUNNING


def test_a_heartbeat_keeps_the_lease_alive(settings):
    settings.JOBS_LEASE_SECONDS = 60
    claim = running()
    job_heartbeat(job_id=claim.job_id, token=claim.token)
    assert reap(now=timezone.now() + timedelta(seconds=30)).stalled == []


def test_an_expired_lease_on_a_resumable_stage_is_recovered_automatically():
    claim = in_pages_stage()
    report = reap(now=timezone.now() + LATER)
    job = reload(claim)
    assert report.stalled == [job.pk] and report.recovered == [job.pk]
    assert (job.status, job.stage, job.worker_token) == ("queued", "pages", None)
    events = list(JobEvent.objects.filter(job=job).values_list("name", "actor", "reason"))[-2:]
    assert events[0][:2] == ("mark_stalled", "reaper") and "recovering automatically" in events[0][2]
    assert events[1][:2] == ("take_over", "reaper")


def test_a_stage_that_is_not_resumable_is_left_for_an_operator():
    claim = running()  # "prepare" is not resumable
    report = reap(now=timezone.now() + LATER)
    job = reload(claim)
    assert job.status == Status.STALLED and job.lost_worker == "w1"
    assert report.left_for_operator == [job.pk]
    assert "left for an operator" in JobEvent.objects.filter(job=job).last().reason


def test_a_stage_that_keeps_losing_its_worker_ends_failed_at_the_attempt_limit():
    job = in_pages_stage().job
    for _ in range(2):
        reap(now=timezone.now() + LATER)
        assert job_claim(job_id=job.pk, worker="again") is not None
    report = reap(now=timezone.now() + LATER)
    job = reload(job)
    assert report.given_up == [job.pk]
    assert (job.status, job.error_code, job.attempt) == ("failed", "worker_lost", 3)


def test_a_cancel_whose_worker_died_is_finished_by_the_reaper():
    claim = in_pages_stage()
    job_cancel(job_id=claim.job_id)
    report = reap(now=timezone.now() + LATER)
    job = reload(claim)
    assert report.cancelled == [job.pk]
    assert job.status == Status.CANCELLED
    assert job.cleanup_from == ""  # the cleanup ran


def test_dry_run_changes_nothing():
    claim = in_pages_stage()
    before = reload(claim).version
    report = reap(now=timezone.now() + LATER, dry_run=True)
    assert report.stalled == [claim.job_id]
    assert reload(claim).version == before


def test_a_matured_backoff_is_dispatched():
    job = new_job()
    # As after a retry's backoff: queued, no task in the broker, not dispatched since.
    OrmQ.objects.all().delete()
    Job.objects.filter(pk=job.pk).update(dispatched_at=None, queued_at=timezone.now() - timedelta(seconds=10))
    report = reap()
    assert report.dispatched == [job.pk]
    assert OrmQ.objects.count() == 1
    assert reload(job).dispatched_at is not None


def test_a_lost_task_is_dispatched_again_only_when_the_broker_is_idle(settings):
    job = new_job()
    long_ago = timezone.now() - timedelta(seconds=settings.JOBS_REDISPATCH_AFTER + 5)
    Job.objects.filter(pk=job.pk).update(dispatched_at=long_ago, queued_at=long_ago)
    # Something still waits in the broker: that may well be this job's task.
    from django_q.tasks import async_task

    async_task("math.floor", 1)
    assert reap().dispatched == []
    OrmQ.objects.all().delete()
    assert reap().dispatched == [job.pk]


def test_the_reap_jobs_command_runs_one_pass(capsys):
    in_pages_stage()
    call_command("reap_jobs", "--dry-run")
    out = capsys.readouterr().out
    assert out.startswith("dry run, nothing changed; would stall: 0, would recover: 0, would give up: 0,")
    assert "would stalled" not in out and "would given up" not in out


def test_a_dry_run_counts_what_it_would_stall_in_plain_words(capsys, settings):
    settings.JOBS_LEASE_SECONDS = 0  # the lease is over as soon as it is taken
    claim = in_pages_stage()
    call_command("reap_jobs", "--dry-run")
    out = capsys.readouterr().out
    assert "would stall: 1," in out
    assert reload(claim).status == Status.RUNNING


def test_a_reaper_pass_prunes_hourly_timing_rows_past_two_days_and_keeps_all_time_totals():
    old = timezone.now() - timedelta(days=3)
    timing_record(kind="k", stage="s", metric="duration", seconds=1.0, at=old)
    hourly = TimingBucket.objects.exclude(hour=ALL_TIME)
    assert hourly.filter(hour__lt=timezone.now() - timedelta(days=2)).exists()
    reap()
    assert not hourly.filter(hour__lt=timezone.now() - timedelta(days=2)).exists()
    assert TimingBucket.objects.filter(hour=ALL_TIME).exists()
