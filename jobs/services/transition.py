"""The one compare-and-set helper every transition goes through, and the event log writer."""

# long-module: the compare-and-set and the SQL it is pre-built as (with the event and stage-run
# writes folded into it on PostgreSQL) must be read together to check the fencing and lock order.

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from functools import cache
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
from jobs.timings import Timing, timing_insert_sql, timing_of_claim, timing_params, timing_record

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
    sql, fields = _insert_sql(type(obj), connection.vendor)
    params = [field.get_db_prep_save(getattr(obj, field.attname), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        obj.pk = cursor.fetchone()[0]
    obj._state.adding = False
    obj._state.db = connection.alias


@cache
def _insert_sql(model: type[models.Model], vendor: str) -> tuple[str, tuple[Any, ...]]:
    # Both backends return the new id from the INSERT (PostgreSQL, SQLite 3.35+).
    quote = connection.ops.quote_name
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key)
    columns = ", ".join(quote(str(f.column)) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders}) "
        f"RETURNING {quote(str(meta.pk.column))}"
    )
    return sql, fields


def update_row(model: type[models.Model], pk: Any, changes: dict[str, Any], *, expect: dict[str, Any]) -> int:
    """``model.objects.filter(pk=pk, **expect).update(**changes)`` for plain values, with SQL
    built once per model, fields and backend: the engine's hot UPDATEs (a stage run closed per
    stage), where the ORM compiled the query every time. Returns the rows matched (0 or 1)."""
    sql, set_fields, where_fields = _update_sql(model, tuple(changes), tuple(expect), connection.vendor)
    params = [f.get_db_prep_save(changes[f.name], connection) for f in set_fields]
    params.append(model._meta.pk.get_db_prep_value(pk, connection))
    params += [f.get_db_prep_value(expect[f.name], connection) for f in where_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field)  # a concrete column, never a reverse relation
    return field


@cache
def _update_sql(
    model: type[models.Model], changed: tuple[str, ...], expected: tuple[str, ...], vendor: str
) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    quote = connection.ops.quote_name
    meta = model._meta
    set_fields = tuple(_field(model, name) for name in changed)
    where_fields = tuple(_field(model, name) for name in expected)
    assignments = ", ".join(f"{quote(str(f.column))} = %s" for f in set_fields)
    conditions = "".join(f" AND {quote(str(f.column))} = %s" for f in where_fields)
    pk = quote(str(meta.pk.column))
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {pk} = %s{conditions}"
    return sql, set_fields, where_fields


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
    shape and backend (:func:`_transition_sql`); a ``Q`` guard goes through the ORM. On
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
            shape = _Shape(
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
            row = _compare_and_set(
                job, shape, source_status, source_version, token, due_by, event, close_run, count, new_run
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
            row = update_returning(where, changes, _RETURNED, relaxed=relax)
        if row is None:
            raise _why_not(job.pk, token)
        job.progress, job.processed, job.total = row[: len(_RETURNED)]
        folded = event is not None and len(row) > len(_RETURNED)
        if folded:  # the event was inserted by the same statement
            assert event is not None
            event.progress, event.processed, event.total = row[: len(_RETURNED)]
            event.pk = row[len(_RETURNED)]
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
            _folded_runs(row[len(_RETURNED) + 1 :], close_run, new_run)
        else:
            _run_writes(close_run, new_run, count)
        if finishing:
            _on_finish(job)
        if after_commit is not None:
            transaction.on_commit(lambda: after_commit(job))
    return job


_RETURNED = ("progress", "processed", "total")


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


class _Shape(NamedTuple):
    """What the SQL of a transition's compare-and-set depends on (besides the backend)."""

    written: tuple[str, ...]  # the fields it writes, sorted
    rising: bool  # progress only rises (GREATEST)
    fenced: bool  # a worker acts: its token must still be the lease
    due: bool  # only a job that is due (the claim)
    relax: bool  # the transaction's commit is relaxed (jobs/durability.py)
    # PostgreSQL: what else the same statement writes
    close: bool  # closes a stage run ...
    duration: bool  # ... and counts its duration if it was still running
    wait: bool  # counts a timing (the claim's queue wait)
    start: bool  # inserts the next stage run


def _compare_and_set(
    job: Job,
    shape: _Shape,
    source_status: str,
    source_version: int,
    token: str | None,
    due_by: datetime | None,
    event: JobEvent,
    close_run: RunClose | None,
    count: Timing | None,
    start_run: StageRun | None,
) -> tuple[Any, ...] | None:
    """The transition's UPDATE ... RETURNING with pre-built SQL; the row or None.

    On PostgreSQL the same statement inserts ``event`` (with the row's progress) for a matched
    row and returns its id after the row: one round trip per transition instead of two. The
    event still follows the job row's lock (it reads the UPDATE's output), so event ids of one
    job keep their commit order. A ``close_run`` is closed there too, after the job's row (the
    lock order of every other writer of both), and whether it was still running comes last."""
    vendor = connection.vendor
    sql, fields, event_fields = _transition_sql(shape, vendor)
    params = [field.get_db_prep_save(getattr(job, field.attname), connection) for field in fields]
    params += [Job._meta.pk.get_db_prep_value(job.pk, connection), source_version, str(source_status)]
    if token is not None:
        params += [token, *(str(status) for status in LEASED)]
    if due_by is not None:
        params.append(Job._meta.get_field("not_before").get_db_prep_value(due_by, connection))
    params += [field.get_db_prep_save(getattr(event, field.attname), connection) for field in event_fields]
    if event_fields:  # the stage-run and timing writes folded in (PostgreSQL), in SQL order
        if close_run is not None:
            params += [
                close_run.outcome,
                StageRun._meta.get_field("finished_at").get_db_prep_value(close_run.at, connection),
                close_run.pk,
                str(StageRun.Outcome.RUNNING),
            ]
            if close_run.duration is not None:
                params += timing_params(close_run.duration)
        if count is not None:
            params += timing_params(count)
        if start_run is not None:
            _, run_fields = _insert_sql(StageRun, vendor)
            params += [f.get_db_prep_save(getattr(start_run, f.attname), connection) for f in run_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


@cache
def _transition_sql(shape: _Shape, vendor: str) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """The compare-and-set of one transition shape: the statement ``update_returning`` compiles
    through the ORM from the same conditions, built once per process; on PostgreSQL with the
    event's INSERT folded in (``event_fields``: the event's columns sent as parameters)."""
    quote = connection.ops.quote_name
    fields = tuple(_field(Job, name) for name in shape.written)
    greatest = "MAX" if vendor == "sqlite" else "GREATEST"  # as Django's Greatest compiles
    assignments = []
    for field in fields:
        column = quote(str(field.column))
        value = f"{greatest}({column}, %s)" if shape.rising and field.name == "progress" else "%s"
        assignments.append(f"{column} = {value}")
    status = quote("status")
    where = f"{quote('id')} = %s AND {quote('version')} = %s AND {status} = %s"
    if shape.fenced:
        where += f" AND {quote('worker_token')} = %s AND {status} IN (%s, %s)"
    if shape.due:
        not_before = quote("not_before")
        where += f" AND ({not_before} IS NULL OR {not_before} <= %s)"
    returned = [quote(name) for name in _RETURNED]
    if shape.relax:
        returned.append(f"{RELAX_EXPRESSION} AS relaxed")  # evaluated only for a matched row
    table = quote(Job._meta.db_table)
    update = f"UPDATE {table} SET {', '.join(assignments)} WHERE {where} RETURNING {', '.join(returned)}"
    if vendor != "postgresql":  # SQLite has no INSERT fed by an UPDATE: the event follows
        return update, fields, ()
    meta = JobEvent._meta
    columns = tuple(f for f in meta.concrete_fields if not f.primary_key)
    event_fields = tuple(f for f in columns if f.name not in _RETURNED)
    values = ", ".join(f"j.{quote(f.name)}" if f.name in _RETURNED else "%s" for f in columns)
    insert = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(str(f.column)) for f in columns)}) "
        f"SELECT {values} FROM j{' WHERE j.relaxed IS NOT NULL' if shape.relax else ''} "
    )
    event_id = quote(str(meta.pk.column))
    if not (shape.close or shape.wait or shape.start):
        sql = f"WITH j AS ({update}) {insert}RETURNING {', '.join(returned[: len(_RETURNED)])}, {event_id}"
        return sql, fields, event_fields
    # Each write below runs only for a matched job row, after its lock (it reads j): the lock
    # order of every other writer (job, then stage run, then the timing rows).
    run = StageRun._meta
    parts = [f"j AS ({update})", f"e AS ({insert}RETURNING {event_id})"]
    results = [f"j.{name}" for name in returned[: len(_RETURNED)]] + [f"(SELECT {event_id} FROM e)"]
    if shape.close:
        parts.append(
            f"r AS (UPDATE {quote(run.db_table)} SET {quote('outcome')} = %s, {quote('finished_at')} = %s "
            f"WHERE {quote('id')} = %s AND {quote('outcome')} = %s AND EXISTS (SELECT 1 FROM j) RETURNING 1)"
        )
        results.append("(SELECT count(*) FROM r)")
        if shape.duration:
            parts.append(f"d AS ({timing_insert_sql('EXISTS (SELECT 1 FROM r)')})")
    if shape.wait:
        parts.append(f"w AS ({timing_insert_sql('EXISTS (SELECT 1 FROM j)')})")
    if shape.start:
        _, run_fields = _insert_sql(StageRun, vendor)
        # After the close: the new run is "running" too (one running run per job).
        after = " WHERE (SELECT count(*) FROM r) >= 0" if shape.close else ""
        run_id = quote(str(run.pk.column))
        run_columns = ", ".join(quote(str(f.column)) for f in run_fields)
        parts.append(
            f"n AS (INSERT INTO {quote(run.db_table)} ({run_columns}) "
            f"SELECT {', '.join(['%s'] * len(run_fields))} FROM j{after} RETURNING {run_id})"
        )
        results.append(f"(SELECT {run_id} FROM n)")
    sql = f"WITH {', '.join(parts)} SELECT {', '.join(results)} FROM j"
    return sql, fields, event_fields


def _on_finish(job: Job) -> None:
    try:
        hook = pipelines.get(job.kind).on_finish
    except LookupError:
        return
    if hook is not None:
        hook(job)


def update_returning(
    where: Q, changes: dict[str, Any], returning: tuple[str, ...], *, relaxed: bool = False
) -> tuple[Any, ...] | None:
    """``Job.objects.filter(where).update(**changes)`` plus ``RETURNING`` (PostgreSQL and SQLite
    3.35+), which ``QuerySet.update`` does not offer: the row of the one job it matched, or None.
    With ``relaxed``, the same statement relaxes the transaction's commit (no extra round trip)."""
    query = Job.objects.filter(where).query.chain(UpdateQuery)
    assert isinstance(query, UpdateQuery)
    query.add_update_values(changes)
    sql, params = query.get_compiler(connection.alias).as_sql()
    columns = ", ".join(connection.ops.quote_name(name) for name in returning)  # Job's own columns
    if relaxed and relaxes_commits():
        columns += f", {RELAX_EXPRESSION}"  # evaluated only for a matched row
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {columns}", params)
        row = cursor.fetchone()
    return None if row is None else tuple(row[: len(returning)])


def _why_not(job_id: Any, token: str | None) -> JobConflict:
    if token is not None:
        current = Job.objects.filter(pk=job_id).values_list("worker_token", "status").first()
        if current is None or current[0] != token or current[1] not in LEASED:
            return LeaseLost(job_id=job_id)
    return JobConflict("This job changed since it was read (another actor moved it first).", job_id=job_id)
