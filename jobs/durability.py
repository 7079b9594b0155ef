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

from django.conf import settings
from django.db import connection


def relax_commit() -> None:
    """Let the current transaction commit without waiting for its WAL flush.

    Call it inside ``transaction.atomic()``; ``SET LOCAL`` ends with the transaction, so the
    connection's next transaction is durable again. A no-op on SQLite or when
    ``JOBS_RELAXED_COMMIT`` is off.
    """
    if connection.vendor != "postgresql" or not settings.JOBS_RELAXED_COMMIT:
        return
    if not connection.in_atomic_block:  # outside a transaction SET LOCAL would only warn
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = off")
