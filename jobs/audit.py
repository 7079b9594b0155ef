"""The invariant queries behind ``manage.py check_jobs``: each must return no rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import Lag

from jobs.models import LEASED, TERMINAL, UNLEASED, Job, JobEvent, StageRun, Status


@dataclass(frozen=True)
class Invariant:
    name: str
    description: str
    query: Callable[[], QuerySet[Job]]


def _running_without_lease() -> QuerySet[Job]:
    return Job.objects.filter(status__in=LEASED).filter(
        Q(worker_token__isnull=True) | Q(heartbeat_at__isnull=True)
    )


def _token_without_running() -> QuerySet[Job]:
    return Job.objects.filter(status__in=UNLEASED, worker_token__isnull=False)


def _terminal_changed() -> QuerySet[Job]:
    left_terminal = JobEvent.objects.filter(kind=JobEvent.Kind.TRANSITION, from_status__in=TERMINAL).values(
        "job_id"
    )
    written_after = Q(status__in=TERMINAL, finished_at__isnull=False, updated_at__gt=F("finished_at"))
    return Job.objects.filter(Q(pk__in=left_terminal) | written_after)


def _progress_out_of_range() -> QuerySet[Job]:
    return Job.objects.filter(
        Q(progress__lt=0)
        | Q(progress__gt=100)
        | (Q(progress__gte=100) & ~Q(status=Status.READY))
        | (Q(status=Status.READY) & ~Q(progress=100))
    )


def _progress_backwards() -> QuerySet[Job]:
    # A retry that restarts an earlier stage lowers progress on purpose: its own event is exempt.
    steps = (
        JobEvent.objects.filter(progress__isnull=False)
        .annotate(previous=Window(Lag("progress"), partition_by=[F("job_id")], order_by=F("id").asc()))
        .filter(previous__isnull=False, progress__lt=F("previous"))
        .exclude(name="retry")
        .values("job_id")
    )
    return Job.objects.filter(pk__in=steps)


def _two_running_attempts() -> QuerySet[Job]:
    doubled = (
        StageRun.objects.filter(outcome=StageRun.Outcome.RUNNING)
        .values("job_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values("job_id")
    )
    return Job.objects.filter(pk__in=doubled)


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


def violations(limit: int = 50) -> dict[str, list[Job]]:
    """Offending jobs per invariant (only invariants with offenders are listed)."""
    found: dict[str, list[Job]] = {}
    for invariant in INVARIANTS:
        rows = list(invariant.query().order_by("pk")[:limit])
        if rows:
            found[invariant.name] = rows
    return found
