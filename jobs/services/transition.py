"""The one compare-and-set helper every transition goes through, and the event log writer."""

# long-module: the compare-and-set and the event and stage-run writes that follow it (or are
# folded into its statement) must be read together to check the fencing and the lock order.

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, models, transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.db.models.sql import UpdateQuery
from django.utils import timezone
from django_fsm import TransitionNotAllowed, can_proceed

from jobs import pipelines
from jobs.durability import RELAX_EXPRESSION, relaxes_commits
from jobs.errors import JobConflict, LeaseLost, TransitionRefused
from jobs.models import FINISHED, LEASED, Actor, Job, JobEvent, StageRun
from jobs.services.transition_sql import (
    RETURNED,
    Close,
    Shape,
    column,
    compare_and_set,
    insert_sql,
    update_sql,
)
from jobs.timings import Timing, timing_of_claim, timing_record

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "job_events"


_WRITTEN_BY_EVERY_TRANSITION = frozenset({"status", "version", "updated_at"})


class EventSource(NamedTuple):
    """What an event records of its job; a :class:`Job` has the same attributes."""

    pk: Any
    status: str
    stage: str
    attempt: int
    version: int
    progress: float
    processed: int | None
    total: int | None


def append_event(job: Job | EventSource, **fields: Any) -> JobEvent:
    """Append one event for ``job`` as it is now (``fields`` as :func:`event_for` takes them);
    call it after the job row's UPDATE.

    The UPDATE holds the job's row lock until commit, so events of one job get ids in commit
    order: a reader that saw id N never later finds a smaller id of the same job.
    """
    event = event_for(job, **fields)
    # On PostgreSQL a trigger (migration jobs/0007) sends pg_notify(NOTIFY_CHANNEL, "job:event")
    # with the insert: delivered at commit, never for a rolled-back event; SSE listeners wake on it.
    insert_row(event)
    return event


def event_for(
    job: Job | EventSource,
    *,
    kind: str,
    name: str,
    actor: str,
    actor_name: str = "",
    from_status: str = "",
    reason: str = "",
    at: datetime | None = None,
) -> JobEvent:
    """The (unsaved) event that records ``job`` as it is now."""
    return JobEvent(
        job_id=job.pk,
        at=at or timezone.now(),
        kind=kind,
        name=name,
        actor=actor,
        actor_name=actor_name[:150],
        from_status=from_status,
        to_status=job.status,
        stage=job.stage,
        attempt=job.attempt,
        job_version=job.version,
        progress=job.progress,
        processed=job.processed,
        total=job.total,
        reason=reason[:500],
    )


def insert_row(obj: models.Model) -> None:
    """``obj.save(force_insert=True)`` (a model with a database-assigned id and no save hooks)
    with SQL built once per model and backend: the engine's hot inserts (an event per
    transition, a stage run per stage), where the model's save path compiled it every time."""
    sql, fields = insert_sql(type(obj), connection.vendor)
    params = [field.get_db_prep_save(getattr(obj, field.attname), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        obj.pk = cursor.fetchone()[0]
    obj._state.adding = False
    obj._state.db = connection.alias


def update_row(model: type[models.Model], pk: Any, changes: dict[str, Any], *, expect: dict[str, Any]) -> int:
    """``model.objects.filter(pk=pk, **expect).update(**changes)`` for plain values, with SQL
    built once per model, fields and backend: the engine's hot UPDATEs (a stage run closed per
    stage), where the ORM compiled the query every time. Returns the rows matched (0 or 1)."""
    sql, set_fields, where_fields = update_sql(model, tuple(changes), tuple(expect), connection.vendor)
    params = [f.get_db_prep_save(changes[f.name], connection) for f in set_fields]
    params.append(model._meta.pk.get_db_prep_value(pk, connection))
    params += [f.get_db_prep_value(expect[f.name], connection) for f in where_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def apply_transition(
    job: Job,
    name: str,
    *,
    actor: Actor,
    actor_name: str = "",
    reason: str = "",
    token: str | None = None,
    expected_version: int | None = None,
    guard: Q | None = None,
    due_by: datetime | None = None,
    now: datetime | None = None,
    after_commit: Callable[[Job], None] | None = None,
    relaxed: bool = False,
    close_run: RunClose | None = None,
    start_run: RunStart | None = None,
    count_wait: bool = False,
    **params: Any,
) -> Job:
    """Run transition ``name`` on ``job`` and persist it as a compare-and-set.

    The UPDATE matches only the row at the version (and status) the caller read, and, where a
    worker acts, only while ``token`` is still the lease. It writes only the fields the
    transition changed, bumps ``version`` and appends one event, in one transaction. Raises
    :class:`TransitionRefused` when the graph forbids it, :class:`LeaseLost` when the token is
    no longer current, :class:`JobConflict` when anything else changed the job first. On any
    raise, ``job`` must be reloaded before reuse. ``relaxed`` (the worker's claims and stage
    moves only, never a terminal transition) lets the caller's transaction commit without
    waiting for its WAL flush (jobs/durability.py), set by the UPDATE itself. ``due_by`` matches
    only a job without ``not_before`` or due by then (the claim); any other ``guard`` is a ``Q``.

    The worker's stage runs change with the transition, in the same transaction and after the
    job's row: ``close_run`` closes the run it ends (``close_run.closed`` says whether it was
    still running; only then is its ``duration`` counted), ``start_run`` starts the next one
    (``start_run.run``), and ``count_wait`` counts the claim's queue wait in the histograms.

    Without a ``guard`` (every worker transition) the UPDATE's SQL is built once per transition
    shape and backend (:mod:`jobs.services.transition_sql`); a ``Q`` guard goes through the ORM. On
    PostgreSQL that one statement also appends the event and makes the stage-run and timing
    writes, so a transition that finishes nothing needs no transaction of its own: a stage
    move is one round trip.
    """
    now = now or timezone.now()
    if expected_version is not None and expected_version != job.version:
        raise JobConflict("This job changed since you looked at it. Reload and try again.", job_id=job.pk)
    if token is not None and job.worker_token != token:
        raise LeaseLost(job_id=job.pk)
    method = getattr(job, name)
    if not can_proceed(method, check_conditions=False):
        raise TransitionRefused(f"A job that is {job.status} cannot {name.replace('_', ' ')}.", job_id=job.pk)
    if not can_proceed(method):
        raise TransitionRefused(
            f"The conditions to {name.replace('_', ' ')} this {job.status} job are not met.",
            job_id=job.pk,
        )
    source_status, source_version = job.status, job.version
    declared = method._django_fsm.get_transition(source_status).custom
    try:
        method(now=now, **params)
    except TransitionNotAllowed as exc:  # a condition changed between the checks above
        raise TransitionRefused(str(exc), job_id=job.pk) from exc
    job.version = source_version + 1
    job.updated_at = now
    # The fields the transition names, changed or not (a copy that is stale in one of them still
    # ends with the transition's value), and what every transition writes. Progress only rises,
    # in the UPDATE itself: a progress report may have raised the row past this copy.
    written = declared["writes"] | _WRITTEN_BY_EVERY_TRANSITION
    rising = "progress" in written and not declared["lowers_progress"]
    relax = relaxed and relaxes_commits()
    finishing = job.status in FINISHED and source_status not in FINISHED
    count = timing_of_claim(job) if count_wait else None
    new_run = start_run.build(job) if start_run is not None else None
    # One statement (PostgreSQL, pre-built, no finish hook) is a transaction by itself. Inside a
    # caller's transaction no savepoint is needed: a refused UPDATE wrote nothing, and any
    # database error aborts the caller's transaction anyway. Saves two round trips.
    single = guard is None and connection.vendor == "postgresql" and not finishing
    with transaction.atomic() if not (connection.in_atomic_block or single) else nullcontext():
        # The status write lives only here: a guarded compare-and-set, never a blind overwrite.
        # Progress reports do not bump the version, so the row may hold newer progress than the
        # copy this transition started from: the event must log the row's, returned by the UPDATE.
        if guard is None:
            event = event_for(
                job,
                kind=JobEvent.Kind.TRANSITION,
                name=name,
                actor=actor,
                actor_name=actor_name,
                from_status=source_status,
                reason=reason,
                at=now,
            )
            shape = Shape(
                tuple(sorted(written)),
                rising,
                token is not None,
                due_by is not None,
                relax,
                close=close_run is not None,
                duration=close_run is not None and close_run.duration is not None,
                wait=count is not None,
                start=new_run is not None,
            )
            row = compare_and_set(
                job,
                shape,
                source_status=source_status,
                source_version=source_version,
                token=token,
                due_by=due_by,
                event=event,
                close=None if close_run is None else Close(close_run.pk, close_run.outcome, close_run.at),
                duration=None if close_run is None else close_run.duration,
                count=count,
                start_run=new_run,
            )
        else:
            event = None
            changes: dict[str, Any] = {field: getattr(job, field) for field in written}
            if rising:
                changes["progress"] = Greatest(F("progress"), job.progress)
            where = Q(pk=job.pk, version=source_version, status=source_status) & guard
            if token is not None:
                where &= Q(worker_token=token, status__in=LEASED)
            if due_by is not None:
                where &= Q(not_before__isnull=True) | Q(not_before__lte=due_by)
            row = update_returning(where, changes, RETURNED, relaxed=relax)
        if row is None:
            raise _why_not(job.pk, token)
        job.progress, job.processed, job.total = row[: len(RETURNED)]
        folded = event is not None and len(row) > len(RETURNED)
        if folded:  # the event was inserted by the same statement
            assert event is not None
            event.progress, event.processed, event.total = row[: len(RETURNED)]
            event.pk = row[len(RETURNED)]
            event._state.adding = False
            event._state.db = connection.alias
        else:
            append_event(
                job,
                kind=JobEvent.Kind.TRANSITION,
                name=name,
                actor=actor,
                actor_name=actor_name,
                from_status=source_status,
                reason=reason,
                at=now,
            )
        if folded:
            _folded_runs(row[len(RETURNED) + 1 :], close_run, new_run)
        else:
            _run_writes(close_run, new_run, count)
        if finishing:
            _on_finish(job)
        if after_commit is not None:
            transaction.on_commit(lambda: after_commit(job))
    return job


@dataclass
class RunClose:
    """A stage run a transition closes with ``outcome`` at ``at``, if it is still running;
    ``closed`` says whether it was (set by :func:`apply_transition`), and only then is
    ``duration`` counted."""

    pk: Any
    outcome: str
    at: datetime
    duration: Timing | None = None
    closed: bool | None = None


@dataclass
class RunStart:
    """The stage run a worker's transition starts, under ``token``; ``run`` once it is written
    (set by :func:`apply_transition`)."""

    token: str
    worker: str
    run: StageRun | None = None

    def build(self, job: Job) -> StageRun:
        """The run of the job's stage and attempt as the transition left them (unsaved)."""
        self.run = StageRun(
            job=job,
            stage=job.stage,
            attempt=job.attempt,
            worker_token=self.token,
            worker_name=self.worker,
            started_at=job.heartbeat_at or timezone.now(),
            hints=job.hints,
        )
        return self.run


def _run_writes(close_run: RunClose | None, start_run: StageRun | None, count: Timing | None) -> None:
    """The stage-run and timing writes of a transition, each a statement of its own."""
    if close_run is not None:
        changes = {"outcome": close_run.outcome, "finished_at": close_run.at}
        running = {"outcome": StageRun.Outcome.RUNNING}
        close_run.closed = bool(update_row(StageRun, close_run.pk, changes, expect=running))
        if close_run.closed and close_run.duration is not None:
            timing_record(**close_run.duration._asdict())
    if start_run is not None:
        insert_row(start_run)  # SQL built once
    if count is not None:
        timing_record(**count._asdict())


def _folded_runs(rest: tuple[Any, ...], close_run: RunClose | None, start_run: StageRun | None) -> None:
    """What the transition's own statement returned of its stage-run writes."""
    if close_run is not None:
        close_run.closed = bool(rest[0])
        rest = rest[1:]
    if start_run is not None:
        start_run.pk = rest[0]
        start_run._state.adding = False
        start_run._state.db = connection.alias


def _on_finish(job: Job) -> None:
    try:
        hook = pipelines.get(job.kind).on_finish
    except LookupError:
        return
    if hook is not None:
        hook(job)


def update_returning(
    where: Q,
    changes: dict[str, Any],
    returning: tuple[str, ...],
    *,
    relaxed: bool = False,
    holds: tuple[str, datetime] | None = None,
) -> tuple[Any, ...] | None:
    """``Job.objects.filter(where).update(**changes)`` plus ``RETURNING`` (PostgreSQL and SQLite
    3.35+), which ``QuerySet.update`` does not offer: the row of the one job it matched, or None.
    With ``relaxed``, the same statement relaxes the transaction's commit (no extra round trip).
    ``holds`` (a field and a time) adds, after the row, whether the field holds that time once
    the row is updated: whether a conditional write of it took effect."""
    query = Job.objects.filter(where).query.chain(UpdateQuery)
    assert isinstance(query, UpdateQuery)
    query.add_update_values(changes)
    sql, params = query.get_compiler(connection.alias).as_sql()
    columns = ", ".join(column(Job, name) for name in returning)
    width = len(returning)
    if holds is not None:
        columns += f", {column(Job, holds[0])} = %s"
        params = (*params, connection.ops.adapt_datetimefield_value(holds[1]))
        width += 1
    if relaxed and relaxes_commits():
        columns += f", {RELAX_EXPRESSION}"  # evaluated only for a matched row
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {columns}", params)
        row = cursor.fetchone()
    return None if row is None else tuple(row[:width])


def _why_not(job_id: Any, token: str | None) -> JobConflict:
    if token is not None:
        current = Job.objects.filter(pk=job_id).values_list("worker_token", "status").first()
        if current is None or current[0] != token or current[1] not in LEASED:
            return LeaseLost(job_id=job_id)
    return JobConflict("This job changed since it was read (another actor moved it first).", job_id=job_id)
