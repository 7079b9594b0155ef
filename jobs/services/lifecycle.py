"""Use cases of users and operators: create, cancel, retry, take over, give up."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs import pipelines, quotas, rules
from jobs.dispatch import dispatch_if_due, enqueue_task, with_the_job
from jobs.errors import get_cause
from jobs.models import Actor, Job, StageRun, Status
from jobs.services.cleanup import job_run_cleanup
from jobs.services.transition import apply_transition


def get_job(job_id: Any) -> Job:
    return Job.objects.get(pk=job_id)


def job_create(
    *,
    kind: str,
    tenant: str,
    subject_id: str,
    subject_version: int = 1,
    payload: dict[str, Any] | None = None,
    actor: Actor = Actor.USER,
    actor_name: str = "",
    reason: str = "uploaded",
) -> Job:
    """Create a job for one subject version and enqueue it; its task leaves at commit.

    Raises :class:`jobs.quotas.QueueFull` when the tenant's queue quota is reached. With q2's
    ORM broker the task is written in the job's own transaction instead (jobs.dispatch).
    """
    pipeline = pipelines.get(kind)
    outbox = with_the_job()
    with transaction.atomic():
        quotas.check_queue(tenant, lock=True)
        job = Job.objects.create(
            kind=kind,
            tenant=tenant,
            subject_id=str(subject_id),
            subject_version=subject_version,
            payload=payload or {},
            stage=pipeline.first_stage,
        )
        job = apply_transition(
            job,
            "enqueue",
            actor=actor,
            actor_name=actor_name,
            reason=reason,
            dispatched=outbox,
            after_commit=None if outbox else dispatch_if_due,
        )
        if outbox:  # the task row commits with the job (jobs.dispatch.with_the_job)
            enqueue_task(job.pk)
        return job


def job_cancel(
    *,
    job_id: Any,
    actor: Actor = Actor.USER,
    actor_name: str = "",
    expected_version: int | None = None,
    reason: str = "cancel requested",
) -> Job:
    """Cancel a queued job at once, or ask the worker of a running job to stop at its next safe
    point (``cancel_requested``). Finished jobs refuse with a clear reason."""
    job = get_job(job_id)
    rules.check("cancel", job)
    first = pipelines.get(job.kind).first_stage
    return apply_transition(
        job,
        "cancel",
        actor=actor,
        actor_name=actor_name,
        reason=reason,
        expected_version=expected_version,
        cleanup_from=first,
        after_commit=_cleanup_if_cancelled,
    )


def _cleanup_if_cancelled(job: Job) -> None:
    if job.status == Status.CANCELLED:
        job_run_cleanup(job_id=job.pk)


def job_retry(
    *,
    job_id: Any,
    actor: Actor = Actor.USER,
    actor_name: str = "",
    expected_version: int | None = None,
    stage: str | None = None,
    hints: dict[str, Any] | None = None,
    force: bool = False,
    reason: str = "",
) -> Job:
    """Queue a failed job again at its failed stage (or ``stage``, e.g. the first to restart).

    Users may retry only where the failure's cause allows it; operators pass ``force`` (their
    permission is checked by the caller).
    """
    job = get_job(job_id)
    rules.check("force_retry" if force else "retry", job)
    pipeline = pipelines.get(job.kind)
    target = stage or job.stage
    pipeline.index(target)  # unknown stage names fail loudly here, before any write
    return apply_transition(
        job,
        "retry",
        actor=actor,
        actor_name=actor_name,
        reason=reason or f"retry at {target}",
        expected_version=expected_version,
        stage=target,
        progress=pipeline.progress_at(target),
        hints=hints,
        guard=Q(cleanup_from=""),
        after_commit=dispatch_if_due,
    )


def job_take_over(
    *,
    job_id: Any,
    actor: Actor = Actor.OPERATOR,
    actor_name: str = "",
    expected_version: int | None = None,
    hints: dict[str, Any] | None = None,
    reason: str = "",
) -> Job:
    """Requeue a stalled job, revoking the lost worker's lease in the same compare-and-set."""
    job = get_job(job_id)
    rules.check("take_over", job)
    with transaction.atomic():
        job = apply_transition(
            job,
            "take_over",
            actor=actor,
            actor_name=actor_name,
            reason=reason or f"taken over from {job.lost_worker or 'a lost worker'}",
            expected_version=expected_version,
            hints=hints,
            after_commit=dispatch_if_due,
        )
        _close_open_runs(job, StageRun.Outcome.LOST)
    return job


def job_give_up(
    *,
    job_id: Any,
    actor: Actor = Actor.OPERATOR,
    actor_name: str = "",
    expected_version: int | None = None,
    code: str = "worker_lost",
    reason: str = "",
) -> Job:
    """Fail a stalled job for good (a user or operator may still retry it later)."""
    job = get_job(job_id)
    rules.check("give_up", job)
    with transaction.atomic():
        job = apply_transition(
            job,
            "give_up",
            actor=actor,
            actor_name=actor_name,
            reason=reason or "given up",
            expected_version=expected_version,
            code=code,
            message=get_cause(code).user_message,
            after_commit=_cleanup_after_commit,
        )
        _close_open_runs(job, StageRun.Outcome.LOST)
    return job


def _cleanup_after_commit(job: Job) -> None:
    job_run_cleanup(job_id=job.pk)


def _close_open_runs(job: Job, outcome: str) -> None:
    StageRun.objects.filter(job=job, outcome=StageRun.Outcome.RUNNING).update(
        outcome=outcome, finished_at=timezone.now()
    )
