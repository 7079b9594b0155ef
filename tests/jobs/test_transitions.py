"""The state graph, the compare-and-set helper and the event log, through the services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.errors import JobConflict, LeaseLost, StageFailure, TransitionRefused
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.cleanup import job_run_cleanup
from jobs.services.lifecycle import job_cancel, job_give_up, job_retry, job_take_over
from jobs.services.transition import apply_transition
from jobs.services.worker import (
    job_claim,
    job_complete_stage,
    job_fail_stage,
    job_heartbeat,
    job_report_progress,
    job_save_checkpoint,
)
from tests.jobs.helpers import cancel_requested, failed, new_job, reload, running, stalled

pytestmark = pytest.mark.django_db


def events(job: Job) -> list[tuple[str, str, str]]:
    return list(
        JobEvent.objects.filter(job=job, kind="transition").values_list("name", "from_status", "to_status")
    )


def test_create_enqueues_with_one_event():
    job = new_job()
    assert job.status == Status.QUEUED
    assert job.stage == "prepare"
    assert job.version == 2
    assert events(job) == [("enqueue", "uploaded", "queued")]


def test_claim_takes_the_lease_and_opens_a_stage_run():
    claim = running(worker="w1")
    job = reload(claim)
    assert job.status == Status.RUNNING
    assert job.worker_token == claim.token
    assert job.heartbeat_at is not None and job.lease_expires_at > job.heartbeat_at
    assert job.attempt == 1
    run = StageRun.objects.get(job=job)
    assert (run.outcome, run.worker_name, run.stage) == ("running", "w1", "prepare")


def test_second_claim_of_the_same_job_gets_nothing():
    claim = running()
    assert job_claim(job_id=claim.job_id, worker="w2") is None
    assert reload(claim).worker_token == claim.token


def test_a_job_is_not_claimed_before_not_before():
    claim = running(fail="internal_error")
    job_fail_stage(claim=claim, error=StageFailure("internal_error", "boom"))
    job = reload(claim)
    assert job.status == Status.QUEUED and job.not_before is not None
    assert job_claim(job_id=job.pk) is None


def test_advance_moves_to_the_next_stage_and_releases_the_lease():
    claim = running()
    job_complete_stage(claim=claim)
    job = reload(claim)
    assert (job.status, job.stage, job.worker_token, job.attempt) == ("queued", "pages", None, 0)
    assert job.progress == 10
    assert StageRun.objects.get(job=job).outcome == "advanced"


def test_continue_inline_claims_the_next_stage_under_a_fresh_token():
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    assert nxt is not None and nxt.token != claim.token
    job = reload(claim)
    assert (job.status, job.stage, job.worker_token) == ("running", "pages", nxt.token)
    assert (job.attempt, job.attempts_total, job.progress) == (1, 2, 10)
    # One compare-and-set, one event: the job never shows "queued" between the two stages.
    assert [e[0] for e in events(job)] == ["enqueue", "claim", "proceed"]
    last = JobEvent.objects.filter(job=job).last()
    assert (last.from_status, last.to_status, last.stage, last.attempt) == ("running", "running", "pages", 1)
    runs = list(StageRun.objects.filter(job=job).values_list("stage", "outcome", "worker_token"))
    assert runs == [("prepare", "advanced", claim.token), ("pages", "running", nxt.token)]
    # The previous stage's token is fenced out at once.
    with pytest.raises(LeaseLost):
        job_save_checkpoint(job_id=job.pk, token=claim.token, checkpoint={"next": 1})


def test_a_stage_completed_from_the_claimed_copy_still_clears_what_the_worker_saved():
    # job_complete_stage does not re-read the job: the claimed copy is stale in the checkpoint
    # and progress written since, and the transition must still reset them for the next stage.
    claim = running()
    job_save_checkpoint(job_id=claim.job_id, token=claim.token, checkpoint={"next": 3})
    job_report_progress(job_id=claim.job_id, token=claim.token, done=3, total=4)
    assert claim.job.checkpoint == {}
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    assert nxt is not None
    job = reload(claim)
    assert (job.checkpoint, job.processed, job.total) == ({}, None, None)


def test_only_the_fields_the_transition_sets_are_written():
    claim = running()
    job = reload(claim)
    with CaptureQueriesContext(connection) as ctx:
        apply_transition(job, "cancel", actor="user", cleanup_from="prepare")
    # The job's UPDATE: a statement of its own, or (PostgreSQL) the CTE that feeds the event's INSERT.
    statement = next(q["sql"] for q in ctx.captured_queries if 'UPDATE "jobs_job"' in q["sql"])
    update = statement[statement.index('UPDATE "jobs_job"') :]
    set_clause = update.split(" SET ")[1].split(" WHERE ")[0]
    written = sorted(part.split(" = ")[0].strip('"') for part in set_clause.split(", "))
    assert written == ["cancel_requested_at", "status", "updated_at", "version"]
    assert '"version" = ' in update.split(" WHERE ")[1]


def test_stale_version_is_a_conflict_not_an_overwrite():
    job = new_job()
    seen = job.version
    job_cancel(job_id=job.pk)
    with pytest.raises(JobConflict):
        job_cancel(job_id=job.pk, expected_version=seen)
    assert reload(job).status == Status.CANCELLED


def test_a_concurrent_writer_between_read_and_write_gets_a_conflict():
    job = new_job()
    stale = Job.objects.get(pk=job.pk)
    job_cancel(job_id=job.pk)
    with pytest.raises(JobConflict):
        apply_transition(stale, "cancel", actor="user", cleanup_from="prepare")
    assert events(job)[-1] == ("cancel", "queued", "cancelled")
    assert len(events(job)) == 2


def test_cancel_of_a_queued_job_is_immediate():
    job = job_cancel(job_id=new_job().pk)
    assert job.status == Status.CANCELLED and job.finished_at is not None


def test_cancel_of_a_running_job_asks_the_worker():
    claim = cancel_requested()
    job = reload(claim)
    assert job.status == Status.CANCEL_REQUESTED
    assert job.worker_token == claim.token
    assert job_heartbeat(job_id=job.pk, token=claim.token).cancel_requested


@pytest.mark.parametrize("maker", [failed, lambda: job_cancel(job_id=new_job().pk)])
def test_finished_jobs_refuse_cancel(maker):
    job = maker()
    with pytest.raises(TransitionRefused, match="already finished"):
        job_cancel(job_id=job.pk)


def test_second_cancel_is_refused_with_a_reason():
    claim = cancel_requested()
    with pytest.raises(TransitionRefused, match="already requested"):
        job_cancel(job_id=claim.job_id)


def test_ready_is_terminal_for_late_workers():
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    nxt = job_complete_stage(claim=nxt, continue_inline=True)
    assert nxt is not None
    assert job_complete_stage(claim=nxt) is None
    job = reload(claim)
    assert job.status == Status.READY and job.progress == 100 and job.worker_token is None
    with pytest.raises(LeaseLost):
        job_report_progress(job_id=job.pk, token=nxt.token, done=1, total=2)
    with pytest.raises(JobConflict):
        job_fail_stage(claim=nxt, error=RuntimeError("late"))
    assert reload(job).status == Status.READY


def test_worker_failure_with_a_permanent_cause_fails_and_schedules_cleanup():
    job = failed("encrypted_input")
    assert job.status == Status.FAILED
    assert job.error_code == "encrypted_input"
    assert "password" in job.error_message
    run = StageRun.objects.get(job=job)
    assert (
        run.outcome == "failed" and run.error_type.endswith("StageFailure") and "Traceback" in run.traceback
    )


def test_user_may_not_retry_a_cause_that_retrying_cannot_fix():
    job = failed("encrypted_input")
    with pytest.raises(TransitionRefused, match="cannot be fixed by retrying"):
        job_retry(job_id=job.pk)
    assert reload(job).status == Status.FAILED


def test_operator_may_force_a_retry_and_restart_from_the_first_stage():
    job = failed("embedding_auth")
    job = job_retry(job_id=job.pk, actor="operator", actor_name="ops", force=True, stage="prepare")
    assert (job.status, job.stage, job.attempt, job.error_code) == ("queued", "prepare", 0, "")
    event = JobEvent.objects.filter(job=job).last()
    assert (event.name, event.actor, event.actor_name) == ("retry", "operator", "ops")


def test_retry_to_an_unknown_stage_changes_nothing():
    job = failed("embedding_auth")
    with pytest.raises(KeyError):
        job_retry(job_id=job.pk, stage="nope", force=True)
    assert reload(job).status == Status.FAILED


def test_stalled_job_is_taken_over_and_the_old_token_revoked():
    claim = stalled()
    job = reload(claim)
    assert job.status == Status.STALLED and job.lost_worker == "w1"
    job = job_take_over(job_id=job.pk, actor_name="ops", expected_version=job.version)
    assert job.status == Status.QUEUED and job.worker_token is None
    assert not job_heartbeat(job_id=job.pk, token=claim.token).alive
    assert StageRun.objects.get(job=job).outcome == "lost"


def test_give_up_fails_a_stalled_job_with_worker_lost():
    claim = stalled()
    job = job_give_up(job_id=claim.job_id, actor_name="ops")
    assert (job.status, job.error_code) == ("failed", "worker_lost")


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (new_job, "publish"),
        (new_job, "take_over"),
        (lambda: reload(running()), "retry"),
        (lambda: reload(running()), "give_up"),
        (lambda: reload(running()), "enqueue"),
        (lambda: failed(), "cancel"),
        (lambda: failed(), "advance"),
    ],
)
def test_transitions_outside_the_graph_are_refused(make, name):
    job = make()
    before = (job.status, job.version)
    with pytest.raises(TransitionRefused):
        apply_transition(job, name, actor="operator")
    job = reload(job)
    assert (job.status, job.version) == before


def test_mark_stalled_needs_an_expired_lease():
    job = reload(running())
    with pytest.raises(TransitionRefused):
        apply_transition(job, "mark_stalled", actor="reaper")


def cleaned(job: Job) -> Job:
    """The failed run's cleanup (after commit, which a test inside one transaction never sees)."""
    job_run_cleanup(job_id=job.pk)
    return reload(job)


def _assignments(job: Job, name: str, monkeypatch: pytest.MonkeyPatch, **params: object) -> set[str]:
    """The fields transition ``name`` assigns on ``job`` (in memory only), by watching them."""
    assigned: set[str] = set()
    original = Job.__setattr__

    def watching(self: Job, attr: str, value: object) -> None:
        assigned.add(attr)
        original(self, attr, value)

    monkeypatch.setattr(Job, "__setattr__", watching)
    getattr(job, name)(now=timezone.now() + timedelta(hours=1), **params)
    monkeypatch.undo()
    return assigned - {"status"}  # django-fsm sets the state field itself


@pytest.mark.parametrize(
    ("make", "name", "params"),
    [
        (lambda: reload(new_job()), "claim", {"new_token": "t", "worker": "w", "lease": 30}),
        (lambda: reload(running()), "advance", {"next_stage": "pages", "progress": 10.0, "skipped": []}),
        (
            lambda: reload(running()),
            "proceed",
            {"next_stage": "pages", "progress": 10.0, "skipped": [], "new_token": "t", "lease": 30},
        ),
        (lambda: reload(running()), "publish", {}),
        (
            lambda: reload(running()),
            "retry_later",
            {"not_before": timezone.now(), "code": "internal_error", "message": "m", "hints": {"a": 1}},
        ),
        (lambda: reload(running()), "fail", {"code": "internal_error", "message": "m"}),
        (lambda: reload(new_job()), "cancel", {"cleanup_from": "prepare"}),
        (lambda: reload(running()), "cancel", {"cleanup_from": "prepare"}),
        (lambda: reload(cancel_requested()), "finish_cancel", {"cleanup_from": "prepare"}),
        (lambda: reload(running()), "mark_stalled", {}),
        (lambda: reload(stalled()), "take_over", {"hints": {"a": 1}}),
        (lambda: reload(stalled()), "give_up", {"code": "worker_lost", "message": "m"}),
        (lambda: cleaned(failed("corrupt_input")), "retry", {"stage": "prepare", "progress": 0.0}),
        (lambda: cleaned(failed("corrupt_input")), "retry", {"stage": "pages", "progress": 20.0}),
    ],
)
def test_every_field_a_transition_assigns_is_one_it_declares(make, name, params, monkeypatch):
    """apply_transition writes the declared fields only: an undeclared assignment would be lost."""
    job = make()
    declared = getattr(Job, name)._django_fsm.get_transition(job.status).custom["writes"]
    assert _assignments(job, name, monkeypatch, **params) <= declared


def test_a_refusal_names_the_state_by_its_label_not_its_code_word():
    # The test kind registers no state labels: the stage's label while it runs, else the neutral
    # status label.
    with pytest.raises(TransitionRefused) as refused:
        job_retry(job_id=cancel_requested().job_id)
    assert refused.value.message == "Only a failed job can be retried; this one is “Stopping…”."
    with pytest.raises(TransitionRefused) as refused:
        job_take_over(job_id=new_job().pk)
    assert refused.value.message == "Only a stalled job can be taken over; this one is “Queued”."
