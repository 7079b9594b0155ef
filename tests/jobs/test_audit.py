"""``check_jobs``: exits 0 on a healthy table and names the offenders of a broken invariant.

Breaking an invariant needs writes that bypass the services, which is the point: the auditor
exists to catch exactly those. Where a database constraint already forbids the state, the test
shows the database refusing it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.errors import StageFailure
from jobs.models import Actor, Job, JobEvent, StageRun
from jobs.services.lifecycle import job_retry
from jobs.services.worker import job_complete_stage, job_fail_stage
from tests.jobs.helpers import failed, new_job, running

pytestmark = pytest.mark.django_db


def audit(capsys) -> tuple[int, str]:
    try:
        call_command("check_jobs")
    except SystemExit as exit_:
        return int(exit_.code or 0), capsys.readouterr().out
    return 0, capsys.readouterr().out


def ready_job() -> Job:
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    assert nxt is not None
    last = job_complete_stage(claim=nxt, continue_inline=True)
    assert last is not None
    job_complete_stage(claim=last)
    return Job.objects.get(pk=claim.job_id)


def test_a_healthy_table_passes(capsys):
    ready_job()
    running()
    failed()
    code, out = audit(capsys)
    assert code == 0, out
    assert "all invariants hold" in out


def test_a_ready_job_written_after_finishing_is_reported(capsys):
    job = ready_job()
    Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() + timedelta(seconds=5))
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL terminal_changed" in out and str(job.pk) in out


def test_progress_going_backwards_in_the_event_log_is_reported(capsys):
    claim = running()
    JobEvent.objects.create(
        job_id=claim.job_id, kind="progress", name="progress", actor="worker", progress=50
    )
    JobEvent.objects.create(
        job_id=claim.job_id, kind="progress", name="progress", actor="worker", progress=40
    )
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL progress_backwards" in out and str(claim.job_id) in out


def test_a_restart_from_an_earlier_stage_is_not_progress_going_backwards(capsys):
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    job_fail_stage(claim=nxt, error=StageFailure("embedding_auth"))
    job_retry(job_id=claim.job_id, force=True, stage="prepare", actor=Actor.OPERATOR)
    code, out = audit(capsys)
    assert code == 0, out


@pytest.mark.parametrize(
    "change",
    [
        {"progress": 100},
        {"progress": 101},
        {"worker_token": None},
        {"heartbeat_at": None},
    ],
)
def test_the_database_refuses_states_the_invariants_forbid(change):
    claim = running()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=claim.job_id).update(**change)


def test_the_database_refuses_a_token_on_a_queued_job():
    job = new_job()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(worker_token="stolen")


def test_the_database_refuses_two_running_attempts_of_one_job():
    claim = running()
    with pytest.raises(IntegrityError), transaction.atomic():
        StageRun.objects.create(
            job_id=claim.job_id, stage="prepare", attempt=2, worker_token="x", worker_name="x"
        )
