"""Running stages in this process: the executor, its watchdog, outcomes and fencing.

These tests commit (the watchdog thread has its own connection), hence ``transactional_db``.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from jobs import pipelines
from jobs.executor import run_job
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel
from jobs.services.reaper import reap
from jobs.watchdog import watchdog
from tests.conftest import wait_for
from tests.jobs.helpers import new_job, reload
from tests.testapp.models import Call, Cleaned, Output, Published
from tests.testapp.pipelines import KIND

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_engine")]


@pytest.fixture
def short_deadline():
    original = pipelines.get(KIND)
    stages = tuple(replace(s, deadline=0.5) if s.name == "pages" else s for s in original.stages)
    pipelines.register(replace(original, stages=stages))
    yield
    pipelines.register(original)


def in_thread(job_id) -> threading.Thread:
    def work() -> None:
        try:
            run_job(job_id, worker="thread-worker")
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_job_runs_every_stage_to_ready_and_publishes_once():
    job = new_job(pages=4)
    assert run_job(job.pk) == "done"
    # prepare and pages share a pool and ran in one task; finish is another pool's task.
    job = reload(job)
    assert (job.status, job.stage) == ("queued", "finish")
    assert run_job(job.pk) == "done"
    job = reload(job)
    assert (job.status, job.progress, job.worker_token) == (Status.READY, 100.0, None)
    assert Output.objects.filter(job_id=job.pk).count() == 4
    assert Published.objects.filter(job_id=job.pk).count() == 1
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", flat=True))
    # prepare -> pages: one compare-and-set by the same worker; pages -> finish: through the queue.
    assert names == ["enqueue", "claim", "proceed", "advance", "claim", "publish"]
    progress = list(JobEvent.objects.filter(job=job).values_list("progress", flat=True))
    assert progress == sorted(progress)
    assert 10 < progress[-3] < 100  # progress inside the pages stage was reported


def test_a_duplicate_delivery_does_nothing():
    job = new_job(pages=1)
    run_job(job.pk)
    run_job(job.pk)
    assert run_job(job.pk) == "not claimed"
    assert Published.objects.filter(job_id=job.pk).count() == 1


def test_a_skipped_stage_counts_as_done():
    job = new_job(pages=1, skip_prepare=True)
    run_job(job.pk)
    job = reload(job)
    assert job.skipped_stages == ["prepare"]
    assert StageRun.objects.filter(job=job, stage="prepare").get().outcome == "skipped"


def test_a_transient_failure_is_retried_later_with_the_policy_delay():
    job = new_job(pages=2, fail="embedding_rate_limited", retry_after=0.5)
    run_job(job.pk)
    job = reload(job)
    assert (job.status, job.stage, job.error_code) == ("queued", "pages", "embedding_rate_limited")
    assert job.not_before >= timezone.now() - timedelta(seconds=0.1)
    run = StageRun.objects.get(job=job, stage="pages")
    assert (run.outcome, run.error_code) == ("retry", "embedding_rate_limited")
    assert "told to fail" in run.error_detail and "Traceback" in run.traceback
    assert "told to fail" not in job.error_message


def test_the_attempt_limit_ends_in_failed_with_cleanup():
    job = new_job(pages=2, fail="embedding_rate_limited", retry_after=0)
    for _ in range(3):
        wait_for(lambda: reload(job).not_before <= timezone.now(), timeout=5)
        run_job(job.pk)
    job = reload(job)
    assert (job.status, job.error_code, job.attempt) == ("failed", "embedding_rate_limited", 3)
    assert Cleaned.objects.filter(job_id=job.pk, from_stage="pages").exists()
    assert job.cleanup_from == ""


def test_an_unexpected_exception_is_an_internal_error_with_operator_detail(monkeypatch):
    job = new_job(pages=2)

    def explode(ctx):
        raise ValueError("secret /srv/path in a message")

    original = pipelines.get(KIND)
    stages = tuple(replace(s, handler=explode) if s.name == "prepare" else s for s in original.stages)
    pipelines.register(replace(original, stages=stages))
    try:
        run_job(job.pk)
    finally:
        pipelines.register(original)
    job = reload(job)
    assert job.error_code == "internal_error"
    assert "/srv/path" not in job.error_message
    assert "/srv/path" in StageRun.objects.get(job=job).error_detail


@pytest.mark.usefixtures("short_deadline")
def test_a_hung_stage_is_ended_by_its_own_worker_at_the_deadline():
    job = new_job(pages=3, hang_at=1)
    thread = in_thread(job.pk)
    thread.join(timeout=10)
    assert not thread.is_alive(), "the hung handler was not unwound"
    job = reload(job)
    assert (job.status, job.error_code) == ("queued", "stage_timeout")
    assert job.worker_token is None
    assert StageRun.objects.get(job=job, stage="pages").outcome == "retry"
    # It resumes from its checkpoint: page 0 was saved before the hang.
    assert job.checkpoint == {"next": 1}


def test_cancel_mid_stage_stops_at_the_next_safe_point_and_cleans_up(tmp_path: Path):
    pause = tmp_path / "pause"
    pause.touch()
    job = new_job(pages=3, pause_file=str(pause), pause_at=1)
    thread = in_thread(job.pk)
    wait_for(lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=1).exists(), timeout=10)
    job_cancel(job_id=job.pk, actor_name="alice")
    thread.join(timeout=10)
    assert not thread.is_alive()
    job = reload(job)
    assert job.status == Status.CANCELLED
    assert job.worker_token is None
    assert Output.objects.filter(job_id=job.pk).count() == 0  # page 0's output was removed
    assert Cleaned.objects.filter(job_id=job.pk, from_stage="prepare").exists()
    scratch = Call.objects.get(job_id=job.pk, stage="pages", unit=1).note
    assert not Path(scratch).exists(), "the stage's temp dir must be removed"
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert names[-2:] == [("cancel", "user"), ("finish_cancel", "worker")]


def test_a_worker_whose_job_was_taken_over_steps_back_and_writes_nothing(tmp_path: Path):
    pause = tmp_path / "pause"
    pause.touch()
    job = new_job(pages=3, pause_file=str(pause), pause_at=1)
    thread = in_thread(job.pk)
    wait_for(lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=1).exists(), timeout=10)
    old_token = reload(job).worker_token
    # The worker is presumed dead: its lease is expired and the reaper recovers the job.
    report = reap(now=timezone.now() + timedelta(minutes=5))
    assert job.pk in report.stalled and job.pk in report.recovered
    pause.unlink()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert not Output.objects.filter(job_id=job.pk, worker_token=old_token, key="page-1").exists()
    # A new worker resumes from the checkpoint (page 1), not from page 0.
    run_job(job.pk)
    run_job(job.pk)
    job = reload(job)
    assert job.status == Status.READY
    assert list(Call.objects.filter(job_id=job.pk, stage="pages", unit=0).values_list("unit", flat=True)) == [
        0
    ]
    assert Output.objects.filter(job_id=job.pk).count() == 3


def test_one_watchdog_thread_renews_the_leases_of_every_stage_in_the_process(tmp_path: Path):
    pauses = [tmp_path / "pause-a", tmp_path / "pause-b"]
    jobs = []
    for pause in pauses:
        pause.touch()
        jobs.append(new_job(pages=3, pause_file=str(pause), pause_at=1))
    threads = [in_thread(job.pk) for job in jobs]

    def paused(job: Job) -> bool:
        return Call.objects.filter(job_id=job.pk, stage="pages", unit=1).exists()

    def beat(job: Job) -> datetime:
        at = reload(job).heartbeat_at
        assert at is not None  # a running job always has one (a check constraint)
        return at

    try:
        wait_for(lambda: all(paused(job) for job in jobs), timeout=10)
        paused_at = {job.pk: beat(job) for job in jobs}
        # Both stages hold still at a safe point; only the watchdog can move their heartbeats.
        wait_for(lambda: all(beat(job) > paused_at[job.pk] for job in jobs), timeout=10)
        watchdogs = [t for t in threading.enumerate() if t.name == "jobs-watchdog"]
        assert watchdogs == [watchdog()]
    finally:
        for pause in pauses:
            pause.unlink()
        for thread in threads:
            thread.join(timeout=10)
    # The paged stage ended normally for both: the next stage (another pool) is queued.
    assert [(reload(job).status, reload(job).stage) for job in jobs] == [(Status.QUEUED, "finish")] * 2
    assert [t for t in threading.enumerate() if t.name == "jobs-watchdog"] == [watchdog()]
