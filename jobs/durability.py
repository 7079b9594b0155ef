"""Which of the worker's commits may skip waiting for the WAL flush (PostgreSQL).

A commit with ``synchronous_commit = off`` returns before its WAL reaches the disk: a crash of
the database server within a fraction of a second may lose it, never corrupt anything. The
worker uses that only for writes whose loss merely repeats work: a claim (the job is queued
again and re-dispatched), a stage moving on (``proceed``/``advance``), progress, checkpoints and
a batch of keyed outputs (resume redoes it). Every terminal transition, a publish, a delete and
anything a webhook announces keeps the durable default; a durable commit also flushes every
earlier WAL record, so once ``ready`` is durable, all the outputs it points at are too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection

from jobs.models import LEASED, Job

RELAX_EXPRESSION = "set_config('synchronous_commit', 'off', true)"


def relaxes_commits() -> bool:
    """Whether this connection's repeatable commits are relaxed (PostgreSQL and the setting on)."""
    return connection.vendor == "postgresql" and settings.JOBS_RELAXED_COMMIT


def hold_lease_relaxed(job_id: Any, token: str) -> bool | None:
    """Lock the job row (FOR NO KEY UPDATE) while ``token`` is its lease and relax this
    transaction's commit, in one statement; ``None`` where that does not apply (SQLite, the
    setting off): the caller then takes the lock its own way.

    For a fenced batch of keyed outputs: the lock and the relaxed commit cost one round trip,
    the one the lease check costs anyway. ``set_config`` runs only for the matched row, so a
    lost lease relaxes nothing (and its transaction rolls back).
    """
    if not relaxes_commits():
        return None
    with connection.cursor() as cursor:
        cursor.execute(_hold_lease_sql(), [job_id, token, *(str(status) for status in LEASED)])
        return cursor.fetchone() is not None


@cache
def _hold_lease_sql() -> str:
    quote = connection.ops.quote_name
    meta = Job._meta
    columns = {f.name: quote(str(f.column)) for f in meta.concrete_fields}
    pk, token, status = columns["id"], columns["worker_token"], columns["status"]
    statuses = ", ".join(["%s"] * len(LEASED))
    return (
        f"SELECT {RELAX_EXPRESSION} FROM {quote(meta.db_table)} "
        f"WHERE {pk} = %s AND {token} = %s AND {status} IN ({statuses}) FOR NO KEY UPDATE"
    )
