"""Use cases of a worker: claim, heartbeat, progress, checkpoint, fenced writes, outcomes.

Every write here carries the worker's lease token and changes nothing once the token is no
longer the job's lease (a takeover, a cancel that finished, a reaper that stalled it).
"""

# long-module: every write a worker makes carries its lease token; keeping the fenced writes in
# one module keeps the fencing rule visible in one read.

from __future__ import annotations

import logging
import math
import os
import random
import socket
import traceback as tb_module
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.db import DatabaseError, IntegrityError, InterfaceError, connection, transaction
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Greatest
from django.utils import timezone

from jobs import pipelines
from jobs.dispatch import dispatch, dispatch_if_due
from jobs.durability import hold_lease_relaxed
from jobs.errors import (
    DATABASE_UNAVAILABLE,
    INTERNAL_ERROR,
    JobConflict,
    LeaseLost,
    StageFailure,
    get_cause,
)
from jobs.models import LEASED, Actor, Job, JobEvent, StageRun, Status
from jobs.quotas import quota_for
from jobs.retry import decide
from jobs.services.cleanup import job_run_cleanup
from jobs.services.transition import (
    EventSource,
    RunClose,
    RunStart,
    append_event,
    apply_transition,
    update_returning,
    update_row,
)
from jobs.timings import timing_of_run, timing_run_finished

log = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Claim:
    """What a worker holds while it runs one stage of one job.

    ``shared`` and ``last_event`` pass from one stage to the next that the same task runs
    (``proceed``); a claim taken from the queue starts with neither, so nothing read here
    outlives the task or reaches another worker. ``shared`` holds what the kind's handlers read
    once for the whole run (the subject's rows); ``last_event`` is when (``time.monotonic``) this
    worker last appended a progress event of the job, so no report checks for one sooner than
    ``JOBS_PROGRESS_EVENT_SECONDS`` after it.
    """

    job: Job
    token: str
    run: StageRun
    shared: dict[str, Any] = field(default_factory=dict)
    last_event: float = -math.inf

    @property
    def job_id(self) -> Any:
        return self.job.pk


def _lease_seconds() -> float:
    return settings.JOBS_LEASE_SECONDS


def _claim_loaded(job: Job, worker: str, *, reason: str) -> Claim:
    token = uuid.uuid4().hex
    job = apply_transition(
        job,
        "claim",
        relaxed=True,  # a lost claim only queues the job again (jobs/durability.py)
        actor=Actor.WORKER,
        actor_name=worker,
        reason=reason,
        due_by=timezone.now(),
        worker=worker,
        lease=_lease_seconds(),
        new_token=token,
        start_run=(start := RunStart(token, worker)),
        count_wait=True,  # last in the claim: the histogram row stays locked briefly
    )
    assert start.run is not None
    return Claim(job=job, token=token, run=start.run)


def job_claim(*, job_id: Any, worker: str | None = None) -> Claim | None:
    """Atomically move a due queued job to running for this worker.

    ``None`` means someone else holds it, it is not due, it is not queued, or its tenant is at
    its running quota (then it is deferred): do nothing. Never "read again and run anyway".
    """
    worker = worker or worker_identity()
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status != Status.QUEUED:
        return None
    if job.not_before is not None and job.not_before > timezone.now():
        return None
    try:
        with transaction.atomic():
            if not _within_running_quota(job):
                _defer(job)
                return None
            return _claim_loaded(job, worker, reason=f"claimed attempt {job.attempt + 1}")
    except JobConflict:
        return None


QUOTA_RETRY_SECONDS = 2.0


def _within_running_quota(job: Job) -> bool:
    limit = quota_for(job.tenant).max_running
    if limit is None:
        return True
    if connection.vendor == "postgresql":
        # Serialises claims of one tenant so two workers cannot both take the last slot.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"jobs-tenant:{job.tenant}"])
    running = Job.objects.filter(tenant=job.tenant, status__in=LEASED).count()
    return running < limit


def _defer(job: Job) -> None:
    # Bookkeeping, not a status change: the job stays queued; the reaper dispatches it again
    # once it is due (or a finishing job of the same tenant hands its slot on sooner).
    Job.objects.filter(pk=job.pk, version=job.version, status=Status.QUEUED).update(
        not_before=timezone.now() + timedelta(seconds=QUOTA_RETRY_SECONDS), dispatched_at=None
    )


def dispatch_next_of_tenant(tenant: str) -> None:
    """Hand a freed running slot to the tenant's oldest due job that is waiting for one."""
    due = Q(not_before__isnull=True) | Q(not_before__lte=timezone.now())
    nxt = (
        Job.objects.filter(due, status=Status.QUEUED, tenant=tenant, dispatched_at__isnull=True)
        .order_by("queued_at")
        .values_list("pk", flat=True)
        .first()
    )
    if nxt is not None:
        transaction.on_commit(lambda: dispatch(nxt))


@dataclass(frozen=True)
class HeartbeatAnswer:
    alive: bool
    cancel_requested: bool


def job_heartbeat(*, job_id: Any, token: str) -> HeartbeatAnswer:
    """Renew the lease; the answer says whether it is still ours and whether to cancel."""
    now = timezone.now()
    updated = Job.objects.filter(pk=job_id, worker_token=token, status__in=LEASED).update(
        heartbeat_at=now, lease_expires_at=now + timedelta(seconds=_lease_seconds())
    )
    if not updated:
        return HeartbeatAnswer(alive=False, cancel_requested=False)
    status = Job.objects.filter(pk=job_id).values_list("status", flat=True).first()
    return HeartbeatAnswer(alive=True, cancel_requested=status == Status.CANCEL_REQUESTED)


class Recorded(NamedTuple):
    progress: float  # at least what was recorded (the row's, where an event read it back)
    event: bool  # whether a progress event was appended


def job_report_progress(
    *,
    job_id: Any,
    token: str,
    done: int,
    total: int | None,
    stage: tuple[str, str] | None = None,
    checkpoint: dict[str, Any] | None = None,
    event: bool = True,
    relaxed: bool = False,
) -> Recorded:
    """Record ``done`` of ``total`` for the current stage; the stored progress never drops.

    Appends a progress event at most once per ``JOBS_PROGRESS_EVENT_SECONDS``. ``stage`` (the
    job's kind and stage), where the caller knows it, saves reading it: the token fences it,
    since every stage change issues a new one. ``checkpoint`` is saved by the same statement;
    ``event=False`` skips the event check where the caller knows none is due (it appended one
    within the interval). Inside a caller's transaction (a fenced batch of outputs) it commits
    with that batch, relaxed where the caller says its transaction may be (``relaxed``); on its
    own it is relaxed (a lost progress report is reported again).

    One UPDATE writes the progress, takes the event's slot where it is free and returns what the
    event records; only then is there an event to append, in the same transaction (the row's
    lock held until commit keeps one job's events in commit order). Without an event check the
    UPDATE is the whole report and needs no transaction of its own.
    """
    if stage is None:
        stage = Job.objects.filter(pk=job_id).values_list("kind", "stage").first()
        if stage is None:
            raise LeaseLost(job_id=job_id)
    kind, name = stage
    value = pipelines.get(kind).progress_at(name, done, total)
    now = timezone.now()
    changes: dict[str, Any] = {
        "progress": Greatest(F("progress"), value),
        "processed": done,
        "total": total,
        "checkpoint": F("checkpoint") if checkpoint is None else checkpoint,
        "updated_at": now,
    }
    if event:
        window = now - timedelta(seconds=settings.JOBS_PROGRESS_EVENT_SECONDS)
        free = Q(progress_event_at__isnull=True) | Q(progress_event_at__lte=window)
        changes["progress_event_at"] = Case(When(free, then=Value(now)), default=F("progress_event_at"))
    own = not connection.in_atomic_block
    with transaction.atomic() if own and event else nullcontext():
        row = update_returning(
            Q(pk=job_id, worker_token=token, status__in=LEASED),
            changes,
            EventSource._fields[1:],
            relaxed=own or relaxed,
            holds=("progress_event_at", now) if event else None,
        )
        if row is None:
            raise LeaseLost(job_id=job_id)
        if event and row[-1]:
            source = EventSource(job_id, *row[:-1])
            append_event(source, kind=JobEvent.Kind.PROGRESS, name="progress", actor=Actor.WORKER, at=now)
            return Recorded(source.progress, True)
    return Recorded(value, False)


def job_save_checkpoint(
    *, job_id: Any, token: str, checkpoint: dict[str, Any], relaxed: bool = False
) -> None:
    """Save the stage's checkpoint, fenced by the lease; ``relaxed`` as for a progress report."""
    fence = Q(pk=job_id, worker_token=token, status__in=LEASED)
    changes = {"checkpoint": checkpoint, "updated_at": timezone.now()}
    if update_returning(fence, changes, ("pk",), relaxed=relaxed) is None:
        raise LeaseLost(job_id=job_id)


class Report(NamedTuple):
    """A progress report a fenced batch makes (see :func:`job_report_progress`)."""

    done: int
    total: int | None
    stage: tuple[str, str]
    event: bool


@contextmanager
def fenced(
    *,
    job_id: Any,
    token: str,
    checkpoint: dict[str, Any] | None = None,
    report: Report | None = None,
) -> Iterator[Recorded | None]:
    """A transaction for a batch of stage outputs that first verifies the lease; ``checkpoint``
    and the progress ``report`` commit with the outputs. Yields what the report recorded.

    The job row is locked (FOR NO KEY UPDATE) before any output is written, so a takeover
    waits for this batch to commit and a zombie worker cannot add rows after it: once the
    takeover commits, this check matches nothing. A batch with a checkpoint or a report takes
    that lock with their UPDATE under the lease, as its first statement (an UPDATE that changes
    no key takes the same row lock); one with neither takes it with a lock of its own. On
    SQLite the IMMEDIATE write lock taken at BEGIN serialises the same way.
    """
    with transaction.atomic():
        # Keyed outputs and their checkpoint: a batch lost with its commit is redone on resume,
        # so on PostgreSQL the lease check also relaxes the commit (jobs/durability.py).
        recorded = None
        if report is not None:
            recorded = job_report_progress(
                job_id=job_id, token=token, checkpoint=checkpoint, relaxed=True, **report._asdict()
            )
        elif checkpoint is not None:
            job_save_checkpoint(job_id=job_id, token=token, checkpoint=checkpoint, relaxed=True)
        else:
            held = hold_lease_relaxed(job_id, token)
            if held is None:
                held = bool(
                    Job.objects.select_for_update(no_key=True)
                    .filter(pk=job_id, worker_token=token, status__in=LEASED)
                    .values_list("pk", flat=True)
                )
            if not held:
                raise LeaseLost(job_id=job_id)
        yield recorded


def _finish_run(claim: Claim, outcome: str, **detail: Any) -> None:
    now = timezone.now()
    # SQL built once per set of fields (one per stage on the hot path).
    if update_row(
        StageRun,
        claim.run.pk,
        {"outcome": outcome, "finished_at": now, **detail},
        expect={"outcome": StageRun.Outcome.RUNNING},
    ):
        timing_run_finished(kind=claim.job.kind, run=claim.run, outcome=outcome, at=now)


def _closing(claim: Claim, outcome: str) -> RunClose:
    """The stage run to close with the transition that ends it, and its duration to count."""
    now = timezone.now()
    duration = timing_of_run(kind=claim.job.kind, run=claim.run, outcome=outcome, at=now)
    return RunClose(pk=claim.run.pk, outcome=outcome, at=now, duration=duration)


def job_complete_stage(
    *,
    claim: Claim,
    skipped: bool = False,
    continue_inline: bool = False,
    skip_next: Collection[str] = (),
) -> Claim | None:
    """The stage's handler returned: advance to the next stage, or publish at the last.
    ``skip_next`` names following stages the handler found nothing to do for: the same
    transition passes over them (recorded as skipped), so they are never shown as running.

    With ``continue_inline`` the worker goes on with the next stage itself (``proceed``: one
    compare-and-set, a fresh token) and gets it back, saving a trip through the broker.
    """
    # The claimed copy: its progress and checkpoint may be older than the row (this worker's own
    # reports do not touch it), which the transitions do not read (progress rises in the UPDATE,
    # checkpoints are reset by the fields a transition writes); whatever another actor changes
    # bumps the version, so the compare-and-set refuses a stale copy instead of acting on it.
    job = claim.job
    pipeline = pipelines.get(job.kind)
    nxt, passed = pipeline.stages_to_pass(job.stage, skip_next)
    worker = claim.run.worker_name
    if nxt is None:
        with transaction.atomic():
            close = _closing(claim, StageRun.Outcome.READY)
            apply_transition(
                job,
                "publish",
                actor=Actor.WORKER,
                actor_name=worker,
                token=claim.token,
                reason="published",
                close_run=close,
            )
            if pipeline.publish is not None:
                pipeline.publish(job)  # may raise to refuse; the whole publish rolls back
            dispatch_next_of_tenant(job.tenant)
        return None
    skipped_stages = [*job.skipped_stages, job.stage] if skipped else list(job.skipped_stages)
    skipped_stages += [name for name in passed if name not in skipped_stages]
    reason = f"{job.stage} skipped" if skipped else f"{job.stage} done"
    reason += "".join(f"; {name} skipped" for name in passed)
    outcome = StageRun.Outcome.SKIPPED if skipped else StageRun.Outcome.ADVANCED
    progress = pipeline.progress_at(nxt.name)
    # The stage run closes (and the next one starts) with the transition, in its transaction:
    # on PostgreSQL all in the transition's one statement, which needs no transaction block.
    close = _closing(claim, outcome)
    if not continue_inline:
        apply_transition(
            job,
            "advance",
            relaxed=True,  # a lost stage move repeats the stage: its outputs are keyed
            actor=Actor.WORKER,
            actor_name=worker,
            token=claim.token,
            reason=reason,
            next_stage=nxt.name,
            progress=progress,
            skipped=skipped_stages,
            after_commit=dispatch_if_due,
            close_run=close,
        )
        return None
    token = uuid.uuid4().hex
    apply_transition(
        job,
        "proceed",
        relaxed=True,  # as advance; publish and failures stay durable
        actor=Actor.WORKER,
        actor_name=worker,
        token=claim.token,
        reason=f"{reason}; {nxt.name} continued by the same worker",
        next_stage=nxt.name,
        progress=progress,
        skipped=skipped_stages,
        new_token=token,
        lease=_lease_seconds(),
        close_run=close,
        start_run=(start := RunStart(token, worker)),
    )
    assert start.run is not None
    return Claim(job=job, token=token, run=start.run, shared=claim.shared, last_event=claim.last_event)


def job_fail_stage(*, claim: Claim, error: BaseException, rng: random.Random | None = None) -> Job:
    """The handler raised: retry later or fail, as the cause's policy decides.

    The user sees only the cause's safe message; the exception's type, text and traceback go
    to the stage run for operators.
    """
    job = Job.objects.get(pk=claim.job_id)
    stage = pipelines.get(job.kind).stage(job.stage)
    if isinstance(error, StageFailure):
        cause, retry_after = get_cause(error.cause), error.retry_after
    elif isinstance(error, DatabaseError | InterfaceError) and not isinstance(error, IntegrityError):
        cause, retry_after = DATABASE_UNAVAILABLE, None  # e.g. a PostgreSQL restart mid-stage
    else:
        cause, retry_after = INTERNAL_ERROR, None
    decision = decide(stage.rule_for(cause.code), job.attempt, retry_after=retry_after, rng=rng)
    detail = {
        "error_code": cause.code,
        "error_type": f"{type(error).__module__}.{type(error).__qualname__}"[:200],
        "error_detail": str(error)[:5000],
        "traceback": "".join(tb_module.format_exception(error))[-20000:],
    }
    now = timezone.now()
    worker = claim.run.worker_name
    with transaction.atomic():
        if decision.retry:
            job = apply_transition(
                job,
                "retry_later",
                actor=Actor.WORKER,
                actor_name=worker,
                token=claim.token,
                reason=f"{cause.code}: retry in {decision.delay:.0f}s",
                not_before=now + timedelta(seconds=decision.delay),
                code=cause.code,
                message=cause.user_message,
                hints=decision.hints,
                after_commit=dispatch_if_due,
            )
            _finish_run(claim, StageRun.Outcome.RETRY, **detail)
            dispatch_next_of_tenant(job.tenant)
        else:
            job = apply_transition(
                job,
                "fail",
                actor=Actor.WORKER,
                actor_name=worker,
                token=claim.token,
                reason=cause.code,
                code=cause.code,
                message=cause.user_message,
            )
            _finish_run(claim, StageRun.Outcome.FAILED, **detail)
            dispatch_next_of_tenant(job.tenant)
    if job.status == Status.FAILED:
        job_run_cleanup(job_id=job.pk)
    return job


def job_hand_back(*, claim: Claim, reason: str = "worker shutting down") -> Job:
    """The worker is shutting down: put the running job back in the queue at its checkpoint.

    The lease ends here (no token is left to expire, so the reaper has nothing to stall), the
    checkpoint saved by the last fenced write stays, and the interrupted attempt does not count
    against the stage's retry limit. The job is dispatched again at once: whichever worker is
    up next (on this machine or another) resumes it.
    """
    job = Job.objects.get(pk=claim.job_id)
    with transaction.atomic():
        job = apply_transition(
            job,
            "hand_back",
            actor=Actor.WORKER,
            actor_name=claim.run.worker_name,
            token=claim.token,
            reason=f"{reason}: handed back at its checkpoint",
            after_commit=dispatch_if_due,
        )
        _finish_run(claim, StageRun.Outcome.HANDED_BACK)
        dispatch_next_of_tenant(job.tenant)
    return job


def job_finish_cancel(*, claim: Claim) -> Job:
    """The worker stopped at a safe point after a cancel request: finish it and clean up."""
    job = Job.objects.get(pk=claim.job_id)
    first = pipelines.get(job.kind).first_stage
    with transaction.atomic():
        job = apply_transition(
            job,
            "finish_cancel",
            actor=Actor.WORKER,
            actor_name=claim.run.worker_name,
            token=claim.token,
            reason="stopped at a safe point",
            cleanup_from=first,
        )
        _finish_run(claim, StageRun.Outcome.CANCELLED)
        dispatch_next_of_tenant(job.tenant)
    job_run_cleanup(job_id=job.pk)
    return job
