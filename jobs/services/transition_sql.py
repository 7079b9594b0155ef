"""The SQL of a transition's compare-and-set, built once per transition shape and backend.

Through the ORM every transition compiled its UPDATE anew; here the statement's text is built
once from the models' own metadata (tables, columns and quoting come from ``_meta`` and the
connection, so a renamed column is picked up without editing SQL) and values go in as
parameters. On PostgreSQL the same statement also appends the transition's event and makes its
stage-run and timing writes, so a stage move is one round trip. The conditions and writes are
exactly those of the plain ORM operations they replace (tests/jobs/test_transition_sql.py
runs every worker transition both ways and compares the rows written).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.db import connection, models

from jobs.durability import RELAX_EXPRESSION
from jobs.models import LEASED, Job, JobEvent, StageRun
from jobs.timings import Timing, timing_insert_sql, timing_params

# What the UPDATE returns of the job row: progress only rises there, so the event logs the row's.
RETURNED = ("progress", "processed", "total")


class Shape(NamedTuple):
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


class Close(NamedTuple):
    """The stage run a transition closes: set ``outcome`` and ``finished_at`` if still running."""

    pk: Any
    outcome: str
    at: datetime


def field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    found = model._meta.get_field(name)
    assert isinstance(found, models.Field)  # a concrete column, never a reverse relation
    return found


def column(model: type[models.Model], name: str) -> str:
    """The quoted column of ``model``'s field ``name`` (``"pk"`` for the primary key)."""
    target = model._meta.pk if name == "pk" else field(model, name)
    assert target is not None
    return connection.ops.quote_name(str(target.column))


def table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@cache
def insert_sql(model: type[models.Model], vendor: str) -> tuple[str, tuple[Any, ...]]:
    """The INSERT of one row of ``model`` (every concrete column but the database-assigned id),
    returning the new id (PostgreSQL, SQLite 3.35+); the fields in parameter order."""
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if not f.primary_key)
    columns = ", ".join(column(model, f.name) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {table(model)} ({columns}) VALUES ({placeholders}) RETURNING {column(model, 'pk')}"
    return sql, fields


@cache
def update_sql(
    model: type[models.Model], changed: tuple[str, ...], expected: tuple[str, ...], vendor: str
) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """``UPDATE ... SET <changed> WHERE pk = %s AND <expected> = %s ...``; the set and where fields."""
    set_fields = tuple(field(model, name) for name in changed)
    where_fields = tuple(field(model, name) for name in expected)
    assignments = ", ".join(f"{column(model, f.name)} = %s" for f in set_fields)
    conditions = "".join(f" AND {column(model, f.name)} = %s" for f in where_fields)
    sql = f"UPDATE {table(model)} SET {assignments} WHERE {column(model, 'pk')} = %s{conditions}"
    return sql, set_fields, where_fields


def compare_and_set(
    job: Job,
    shape: Shape,
    *,
    source_status: str,
    source_version: int,
    token: str | None,
    due_by: datetime | None,
    event: JobEvent,
    close: Close | None,
    duration: Timing | None,
    count: Timing | None,
    start_run: StageRun | None,
) -> tuple[Any, ...] | None:
    """The transition's UPDATE ... RETURNING with pre-built SQL; the row or None.

    The row is the job's :data:`RETURNED` values, then (PostgreSQL) what the same statement
    wrote: the id of the ``event`` it inserted (with the row's progress) for a matched row,
    whether ``close`` was still running (then ``duration`` is counted), and the id of
    ``start_run``. The event still follows the job row's lock (it reads the UPDATE's output),
    so event ids of one job keep their commit order; the stage run is closed after the job's
    row, the lock order of every other writer of both."""
    vendor = connection.vendor
    sql, fields, event_fields = transition_sql(shape, vendor)
    params = [f.get_db_prep_save(getattr(job, f.attname), connection) for f in fields]
    params += [Job._meta.pk.get_db_prep_value(job.pk, connection), source_version, str(source_status)]
    if token is not None:
        params += [token, *(str(status) for status in LEASED)]
    if due_by is not None:
        params.append(field(Job, "not_before").get_db_prep_value(due_by, connection))
    params += [f.get_db_prep_save(getattr(event, f.attname), connection) for f in event_fields]
    if event_fields:  # the stage-run and timing writes folded in (PostgreSQL), in SQL order
        if close is not None:
            params += [
                close.outcome,
                field(StageRun, "finished_at").get_db_prep_value(close.at, connection),
                close.pk,
                str(StageRun.Outcome.RUNNING),
            ]
            if duration is not None:
                params += timing_params(duration)
        if count is not None:
            params += timing_params(count)
        if start_run is not None:
            _, run_fields = insert_sql(StageRun, vendor)
            params += [f.get_db_prep_save(getattr(start_run, f.attname), connection) for f in run_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


@cache
def transition_sql(shape: Shape, vendor: str) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """The compare-and-set of one transition shape: the statement ``update_returning`` compiles
    through the ORM from the same conditions, built once per process; on PostgreSQL with the
    event's INSERT folded in (``event_fields``: the event's columns sent as parameters)."""
    fields = tuple(field(Job, name) for name in shape.written)
    greatest = "MAX" if vendor == "sqlite" else "GREATEST"  # as Django's Greatest compiles
    assignments = []
    for written in fields:
        value = "%s"
        if shape.rising and written.name == "progress":
            value = f"{greatest}({column(Job, 'progress')}, %s)"
        assignments.append(f"{column(Job, written.name)} = {value}")
    status = column(Job, "status")
    where = f"{column(Job, 'pk')} = %s AND {column(Job, 'version')} = %s AND {status} = %s"
    if shape.fenced:
        placeholders = ", ".join(["%s"] * len(LEASED))
        where += f" AND {column(Job, 'worker_token')} = %s AND {status} IN ({placeholders})"
    if shape.due:
        not_before = column(Job, "not_before")
        where += f" AND ({not_before} IS NULL OR {not_before} <= %s)"
    returned = [column(Job, name) for name in RETURNED]
    relaxed = [f"{RELAX_EXPRESSION} AS relaxed"] if shape.relax else []  # only for a matched row
    update = (
        f"UPDATE {table(Job)} SET {', '.join(assignments)} WHERE {where} "
        f"RETURNING {', '.join(returned + relaxed)}"
    )
    if vendor != "postgresql":  # SQLite has no INSERT fed by an UPDATE: the event follows
        return update, fields, ()
    columns = tuple(f for f in JobEvent._meta.concrete_fields if not f.primary_key)
    event_fields = tuple(f for f in columns if f.name not in RETURNED)
    # The event's progress, processed and total are the job row's, as the UPDATE returned them.
    values = ", ".join(f"j.{column(Job, f.name)}" if f.name in RETURNED else "%s" for f in columns)
    insert = (
        f"INSERT INTO {table(JobEvent)} ({', '.join(column(JobEvent, f.name) for f in columns)}) "
        f"SELECT {values} FROM j{' WHERE j.relaxed IS NOT NULL' if shape.relax else ''} "
    )
    event_id = column(JobEvent, "pk")
    if not (shape.close or shape.wait or shape.start):
        sql = f"WITH j AS ({update}) {insert}RETURNING {', '.join(returned)}, {event_id}"
        return sql, fields, event_fields
    # Each write below runs only for a matched job row, after its lock (it reads j): the lock
    # order of every other writer (job, then stage run, then the timing rows).
    parts = [f"j AS ({update})", f"e AS ({insert}RETURNING {event_id})"]
    results = [f"j.{name}" for name in returned] + [f"(SELECT {event_id} FROM e)"]
    if shape.close:
        outcome, finished_at = column(StageRun, "outcome"), column(StageRun, "finished_at")
        parts.append(
            f"r AS (UPDATE {table(StageRun)} SET {outcome} = %s, {finished_at} = %s WHERE "
            f"{column(StageRun, 'pk')} = %s AND {outcome} = %s AND EXISTS (SELECT 1 FROM j) RETURNING 1)"
        )
        results.append("(SELECT count(*) FROM r)")
        if shape.duration:
            parts.append(f"d AS ({timing_insert_sql('EXISTS (SELECT 1 FROM r)')})")
    if shape.wait:
        parts.append(f"w AS ({timing_insert_sql('EXISTS (SELECT 1 FROM j)')})")
    if shape.start:
        _, run_fields = insert_sql(StageRun, vendor)
        # After the close: the new run is "running" too (one running run per job).
        after = " WHERE (SELECT count(*) FROM r) >= 0" if shape.close else ""
        run_id = column(StageRun, "pk")
        run_columns = ", ".join(column(StageRun, f.name) for f in run_fields)
        parts.append(
            f"n AS (INSERT INTO {table(StageRun)} ({run_columns}) "
            f"SELECT {', '.join(['%s'] * len(run_fields))} FROM j{after} RETURNING {run_id})"
        )
        results.append(f"(SELECT {run_id} FROM n)")
    sql = f"WITH {', '.join(parts)} SELECT {', '.join(results)} FROM j"
    return sql, fields, event_fields
