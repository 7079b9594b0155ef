"""The reaper: expired leases become ``stalled``, pending cancels finish, lost tasks go out again.

Run by ``manage.py reap_jobs`` (a loop beside the cluster) and by a django-q2 schedule. Every
decision is a transition (hence an event) taken with a compare-and-set, so two reapers, or a
reaper racing a worker that was only slow, cannot both win.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs import pipelines
from jobs.dispatch import dispatch
from jobs.errors import WORKER_LOST, JobConflict
from jobs.models import FINISHED, LEASED, Actor, Job, StageRun, Status
from jobs.services.cleanup import job_run_cleanup
from jobs.services.lifecycle import job_give_up, job_take_over
from jobs.services.transition import apply_transition
from jobs.timings import timing_prune

log = logging.getLogger(__name__)

TIMING_KEEP = timedelta(days=2)  # the health page reads the last day; a day more for late readers

REAPER = "reaper"

# Apps' own unfinished work the reaper finishes each pass (e.g. a delete whose after-commit
# cleanup died): each sweep takes a limit and returns the ids it finished. The engine does not
# know what they are about.
Sweep = Callable[[int], list[Any]]
_SWEEPS: dict[str, Sweep] = {}


def register_sweep(name: str, sweep: Sweep) -> None:
    """Have every reaper pass call ``sweep(limit)`` (registering a name again replaces it)."""
    _SWEEPS[name] = sweep


@dataclass
class ReapReport:
    stalled: list[Any] = field(default_factory=list)
    recovered: list[Any] = field(default_factory=list)
    given_up: list[Any] = field(default_factory=list)
    left_for_operator: list[Any] = field(default_factory=list)
    cancelled: list[Any] = field(default_factory=list)
    dispatched: list[Any] = field(default_factory=list)
    cleaned: list[Any] = field(default_factory=list)
    swept: list[Any] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in self.__dict__.items()}


def recovery_for(job: Job) -> str:
    """What the reaper does with a stalled job: ``cancel``, ``recover``, ``give_up`` or ``leave``.

    Recovered automatically only when its stage is resumable and attempts remain; a stage that
    kills its worker over and over ends failed (worker lost) at the attempt limit instead of
    looping; a stage that cannot resume waits for an operator.
    """
    if job.cancel_requested_at is not None:
        return "cancel"
    try:
        stage = pipelines.get(job.kind).stage(job.stage)
    except LookupError:
        return "leave"
    if not stage.resumable:
        return "leave"
    if job.attempt >= stage.rule_for(WORKER_LOST.code).max_attempts:
        return "give_up"
    return "recover"


_REASONS = {
    "cancel": "finishing the requested cancel",
    "recover": "stage is resumable and attempts remain: recovering automatically",
    "give_up": "attempt limit reached: failing",
    "leave": "stage is not resumable: left for an operator",
}


def _mark_stalled(job: Job, now: datetime) -> bool:
    decision = recovery_for(job)
    try:
        with transaction.atomic():
            apply_transition(
                job,
                "mark_stalled",
                actor=Actor.REAPER,
                actor_name=REAPER,
                reason=f"lease of {job.worker_name or 'worker'} expired; {_REASONS[decision]}",
                guard=Q(lease_expires_at__lt=now),
                now=now,
            )
            StageRun.objects.filter(job=job, outcome=StageRun.Outcome.RUNNING).update(
                outcome=StageRun.Outcome.LOST, finished_at=now, error_code=WORKER_LOST.code
            )
    except JobConflict:
        return False
    return True


def _recover(job: Job, report: ReapReport) -> None:
    decision = recovery_for(job)
    try:
        if decision == "cancel":
            apply_transition(
                job,
                "finish_cancel",
                actor=Actor.REAPER,
                actor_name=REAPER,
                reason="worker gone; cancel finished by the reaper",
                cleanup_from=pipelines.get(job.kind).first_stage,
            )
            job_run_cleanup(job_id=job.pk)
            report.cancelled.append(job.pk)
        elif decision == "recover":
            job_take_over(
                job_id=job.pk,
                actor=Actor.REAPER,
                actor_name=REAPER,
                expected_version=job.version,
                reason=f"automatic recovery from {job.lost_worker or 'a lost worker'}",
            )
            report.recovered.append(job.pk)
        elif decision == "give_up":
            job_give_up(
                job_id=job.pk,
                actor=Actor.REAPER,
                actor_name=REAPER,
                expected_version=job.version,
                code=WORKER_LOST.code,
                reason=f"worker lost on {job.attempt} attempts of {job.stage}",
            )
            report.given_up.append(job.pk)
        else:
            report.left_for_operator.append(job.pk)
    except JobConflict:
        log.info("job %s changed while the reaper decided; next pass looks again", job.pk)


def _broker_idle() -> bool:
    from django_q.brokers import get_broker

    try:
        return int(get_broker().queue_size() or 0) == 0
    except Exception:
        log.exception("cannot read the task queue's size")
        return False


def reap(*, now: datetime | None = None, dry_run: bool = False, limit: int = 500) -> ReapReport:
    """One pass. With ``dry_run`` it only reports what it would do."""
    now = now or timezone.now()
    report = ReapReport()

    # 1. Expired leases (the partial index job_lease_expiry serves this scan).
    expired = list(
        Job.objects.filter(status__in=LEASED, lease_expires_at__lt=now).order_by("lease_expires_at")[:limit]
    )
    for job in expired:
        if dry_run:
            report.stalled.append(job.pk)
            continue
        if _mark_stalled(job, now):
            report.stalled.append(job.pk)

    # 2. Stalled jobs whose fate is automatic (freshly stalled, or a pass that died half-way).
    if not dry_run:
        for job in Job.objects.filter(status=Status.STALLED).order_by("stalled_at")[:limit]:
            _recover(job, report)

    # 3. Queued jobs that are due but have no live task: never dispatched (a backoff that
    #    matured, a dispatch that failed) or dispatched long ago with nothing waiting in the
    #    broker (a lost message: a flushed Redis, a broker restart).
    grace = now - timedelta(seconds=2)
    due = Q(status=Status.QUEUED) & (Q(not_before__isnull=True) | Q(not_before__lte=now))
    never = Job.objects.filter(due, dispatched_at__isnull=True, queued_at__lte=grace)
    stale_cut = now - timedelta(seconds=settings.JOBS_REDISPATCH_AFTER)
    candidates = list(never.order_by("not_before", "queued_at").values_list("pk", flat=True)[:limit])
    stale = Job.objects.filter(due, dispatched_at__lte=stale_cut).order_by("dispatched_at")
    if stale.exists() and _broker_idle():
        candidates += list(stale.values_list("pk", flat=True)[:limit])
    for job_id in candidates:
        if dry_run or dispatch(job_id):
            report.dispatched.append(job_id)

    # 4. Cleanups whose worker died before running them.
    pending = Job.objects.filter(status__in=FINISHED, finished_at__lte=grace).exclude(cleanup_from="")
    for job_id in pending.values_list("pk", flat=True)[:limit]:
        if dry_run or job_run_cleanup(job_id=job_id):
            report.cleaned.append(job_id)

    # 5. Registered sweeps; one that fails is logged and tried again next pass.
    if not dry_run:
        for name, sweep in list(_SWEEPS.items()):
            try:
                report.swept += sweep(limit)
            except Exception:
                log.exception("reaper sweep %s failed; it runs again next pass", name)
        # 6. Hourly timing rows past the longest window any reader asks for (the all-time rows stay).
        timing_prune(before=now - TIMING_KEEP)
    return report
