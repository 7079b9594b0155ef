"""The invariant checks behind ``manage.py check_jobs``: each must find nothing.

Every check is answered by an index, so the audit stays cheap on a table of millions of jobs:
the lease and progress checks read partial indexes whose predicate *is* the violation (empty in
a healthy system), ``terminal_changed`` reads two such indexes, ``progress_backwards`` reads only
the events written since the previous audit (``full=True`` walks the whole log), and
``two_running_attempts`` confirms that the unique index forbidding it is in place (``full=True``
also counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from jobs.models import (
    AUDIT_LEASED_WITHOUT_LEASE,
    AUDIT_PROGRESS_OUT_OF_RANGE,
    AUDIT_TOKEN_WITHOUT_LEASE,
    AUDIT_WRITTEN_AFTER_FINISH,
    TERMINAL,
    AuditMark,
    Job,
    JobEvent,
    StageRun,
)

PROGRESS_MARK = "progress_backwards"
# Events are numbered when inserted but become visible when their transaction commits; events of
# the last minute are checked again by the next audit so that a late commit below the watermark
# is not skipped. Every transaction that writes an event is a short one.
COMMIT_MARGIN = timedelta(seconds=60)


@dataclass(frozen=True)
class Invariant:
    name: str
    description: str
    # (limit, full) -> offending jobs, at most ``limit``.
    find: Callable[[int, bool], list[Job]]


def _jobs(ids: list[UUID], limit: int) -> list[Job]:
    return list(Job.objects.filter(pk__in=ids).order_by("pk")[:limit]) if ids else []


# The lease and progress invariants are also CHECK constraints: these catch a table whose
# constraints were dropped or never validated.
def _running_without_lease(limit: int, full: bool) -> list[Job]:
    return list(Job.objects.filter(AUDIT_LEASED_WITHOUT_LEASE).order_by("pk")[:limit])


def _token_without_running(limit: int, full: bool) -> list[Job]:
    return list(Job.objects.filter(AUDIT_TOKEN_WITHOUT_LEASE).order_by("pk")[:limit])


def _terminal_changed(limit: int, full: bool) -> list[Job]:
    # Two index reads merged here: an OR across the two tables could use neither index.
    left = JobEvent.objects.filter(kind=JobEvent.Kind.TRANSITION, from_status__in=TERMINAL)
    ids = set(left.order_by().values_list("job_id", flat=True)[:limit])
    ids.update(Job.objects.filter(AUDIT_WRITTEN_AFTER_FINISH).order_by().values_list("pk", flat=True)[:limit])
    return _jobs(list(ids), limit)


def _progress_out_of_range(limit: int, full: bool) -> list[Job]:
    return list(Job.objects.filter(AUDIT_PROGRESS_OUT_OF_RANGE).order_by("pk")[:limit])


# Each event with a progress against the one before it in its job's log; the first event after
# the watermark against the last one before it (one probe of the (job, id) index per job). A
# retry that restarts an earlier stage lowers progress on purpose: its own event is exempt, and
# the events after it are compared with it.
PROGRESS_STEPS_BACK = """
SELECT DISTINCT job_id FROM (
    SELECT e.job_id, e.name, e.progress, COALESCE(
        LAG(e.progress) OVER (PARTITION BY e.job_id ORDER BY e.id),
        (SELECT p.progress FROM {events} p
         WHERE p.job_id = e.job_id AND p.id <= %(mark)s AND p.progress IS NOT NULL
         ORDER BY p.id DESC LIMIT 1)
    ) AS previous
    FROM {events} e
    WHERE e.id > %(mark)s AND e.progress IS NOT NULL
) steps
WHERE previous IS NOT NULL AND progress < previous AND name <> 'retry'
"""


def _progress_backwards(limit: int, full: bool) -> list[Job]:
    mark = 0 if full else progress_watermark()
    sql = PROGRESS_STEPS_BACK.format(events=connection.ops.quote_name(JobEvent._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, {"mark": mark})
        ids = [row[0] for row in cursor.fetchall()]
    return _jobs(ids, limit)


def _two_running_attempts(limit: int, full: bool) -> list[Job]:
    if not full:
        # The unique partial index makes the state impossible; what can break is the index itself.
        if not _unique_index_in_place(StageRun._meta.db_table, "stagerun_one_running_per_job"):
            raise MissingConstraint("stagerun_one_running_per_job")
        return []
    doubled = (
        StageRun.objects.filter(outcome=StageRun.Outcome.RUNNING)
        .values("job_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values("job_id")
    )
    return list(Job.objects.filter(pk__in=doubled).order_by("pk")[:limit])


class MissingConstraint(Exception):
    """A constraint an invariant relies on is missing or not valid in the database."""


def _unique_index_in_place(table: str, name: str) -> bool:
    """One catalog read for the one index: Django's ``get_constraints`` would read every index and
    constraint of the table (on SQLite, reading each one's SQL too), about 10 ms a call, and the
    stateful tests audit after every step."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # An index left behind by a failed CREATE INDEX CONCURRENTLY exists but enforces nothing.
            cursor.execute(
                "SELECT indisunique AND indisvalid FROM pg_index"
                " WHERE indexrelid = to_regclass(%s) AND indrelid = to_regclass(%s)",
                [connection.ops.quote_name(name), connection.ops.quote_name(table)],
            )
        else:
            cursor.execute('SELECT "unique" FROM pragma_index_list(%s) WHERE name = %s', [table, name])
        row = cursor.fetchone()
    return bool(row and row[0])


INVARIANTS = [
    Invariant(
        "running_without_lease",
        "running or cancel_requested without token or heartbeat",
        _running_without_lease,
    ),
    Invariant(
        "token_without_running", "queued or finished but still holding a worker token", _token_without_running
    ),
    Invariant("terminal_changed", "ready or cancelled job changed after finishing", _terminal_changed),
    Invariant("progress_out_of_range", "progress outside 0-100, or 100 before ready", _progress_out_of_range),
    Invariant("progress_backwards", "progress went backwards in the event log", _progress_backwards),
    Invariant("two_running_attempts", "two running attempts of one job", _two_running_attempts),
]


@dataclass(frozen=True)
class Check:
    """An app's own audit check (e.g. rows left without their subject): ``find(limit)`` returns
    short descriptions of at most ``limit`` offenders, nothing when the check holds."""

    name: str
    description: str
    find: Callable[[int], list[str]]


CHECKS: dict[str, Check] = {}


def register_check(check: Check) -> None:
    """Add ``check`` to ``check_jobs`` (registering a name again replaces it)."""
    CHECKS[check.name] = check


def check_violations(limit: int = 50) -> dict[str, list[str]]:
    """Offenders per registered app check (only checks with offenders are listed)."""
    found: dict[str, list[str]] = {}
    for check in list(CHECKS.values()):
        rows = check.find(limit)
        if rows:
            found[check.name] = rows
    return found


def violations(limit: int = 50, *, full: bool = False) -> dict[str, list[Job]]:
    """Offending jobs per invariant (only invariants with offenders are listed).

    ``progress_backwards`` covers the events since the watermark left by
    :func:`audit_mark_advance` (all of them until one is set); ``full`` checks the whole log.
    A missing constraint is reported under its invariant's name with no jobs listed.
    """
    found: dict[str, list[Job]] = {}
    for invariant in INVARIANTS:
        try:
            rows = invariant.find(limit, full)
        except MissingConstraint:
            found[invariant.name] = []
            continue
        if rows:
            found[invariant.name] = rows
    return found


def progress_watermark() -> int:
    mark = AuditMark.objects.filter(name=PROGRESS_MARK).values_list("value", flat=True).first()
    return mark or 0


def audit_mark_advance() -> int:
    """Move the progress audit's watermark to the newest event older than the commit margin, so
    that the next audit reads only what was written after this one. Returns the new watermark."""
    settled = JobEvent.objects.filter(at__lt=timezone.now() - COMMIT_MARGIN).order_by("-id")
    newest = settled.values_list("id", flat=True).first() or 0
    mark = max(newest, progress_watermark())
    AuditMark.objects.update_or_create(
        name=PROGRESS_MARK, defaults={"value": mark, "updated_at": timezone.now()}
    )
    return mark
