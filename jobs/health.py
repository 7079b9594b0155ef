"""The job engine's health figures, read from the database at the moment they are asked for.

The admin health page and ``/metrics`` show the same numbers because both call :func:`snapshot`.
Workers are other processes (other machines, even), so nothing here is counted in memory: every
figure is a query on the job table, the stage runs or the event log.

Windows: failure and retry figures are given for the last hour and the last day; queue waits and
stage durations (median and p95) over the last day. Reads are bounded (``SAMPLE_LIMIT`` rows per
percentile, ``TENANT_LIMIT`` tenants) so a scrape on a busy day stays cheap.
"""

# long-module: one snapshot of every figure the health page and /metrics show, so both read the
# same queries; splitting it would split figures that must agree.

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from jobs import pipelines
from jobs.errors import get_cause
from jobs.models import LEASED, Job, JobEvent, StageRun, Status
from jobs.quotas import quota_for

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TENANT_LIMIT = 50
SAMPLE_LIMIT = 50_000
OTHER_TENANTS = "__other__"

# Transitions into ``queued`` that start a wait for a worker. ``retry_later`` is left out on
# purpose: its wait is a backoff the policy chose, not a queue that is too long.
QUEUE_ENTRIES = ("enqueue", "advance", "take_over", "retry")
COMPLETED = (StageRun.Outcome.ADVANCED, StageRun.Outcome.READY)
FAILED_ATTEMPTS = (StageRun.Outcome.RETRY, StageRun.Outcome.FAILED, StageRun.Outcome.LOST)


def quantile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank quantile (``q`` in 0..1) of ``values``; ``None`` when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Timing:
    samples: int
    median: float | None
    p95: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Timing:
        return cls(len(values), quantile(values, 0.5), quantile(values, 0.95))


@dataclass(frozen=True)
class StateCount:
    kind: str
    status: str
    stage: str
    count: int


@dataclass(frozen=True)
class StageTiming:
    stage: str
    wait: Timing
    duration: Timing


@dataclass(frozen=True)
class CauseCounts:
    failed_attempts: int = 0  # attempts that ended with this cause (retried, failed or lost)
    retried: int = 0  # of which the policy retried automatically
    failed_jobs: int = 0  # jobs now failed with this cause that finished in the window


@dataclass(frozen=True)
class CauseRates:
    cause: str
    transient: bool
    user_retryable: bool
    hour: CauseCounts
    day: CauseCounts


@dataclass(frozen=True)
class AttemptRates:
    """Finished attempts in a window and the share of them that failed."""

    finished: int
    failed: int


@dataclass(frozen=True)
class ActorCount:
    """How often a recovery transition (retry, take over, give up, automatic retry) happened."""

    name: str
    actor: str
    hour: int
    day: int


@dataclass(frozen=True)
class TenantLoad:
    tenant: str
    running: int
    queued: int
    max_running: int | None = None
    max_queued: int | None = None

    @property
    def at_running_limit(self) -> bool:
        return self.max_running is not None and self.running >= self.max_running

    @property
    def at_queued_limit(self) -> bool:
        return self.max_queued is not None and self.queued >= self.max_queued


@dataclass(frozen=True)
class LiveWorker:
    name: str
    last_heartbeat: datetime
    running: int


@dataclass(frozen=True)
class Bucket:
    start: datetime
    ready: int = 0
    failed: int = 0
    failed_attempts: int = 0


@dataclass(frozen=True)
class Health:
    at: datetime
    states: list[StateCount]
    stalled: int
    oldest_queued_age: float | None
    timings: list[StageTiming]
    causes: list[CauseRates]
    attempts_hour: AttemptRates
    attempts_day: AttemptRates
    recoveries: list[ActorCount]
    tenants: list[TenantLoad]
    other_tenants: TenantLoad | None
    workers: list[LiveWorker]
    throughput: list[Bucket]
    status_totals: dict[str, int] = field(default_factory=dict)


# --- the figures, one query (or two) each -----------------------------------------------------


def stage_order() -> dict[str, int]:
    """Stage names in pipeline order (the first pipeline that names a stage decides)."""
    order: dict[str, int] = {}
    for pipeline in pipelines.registered().values():
        for i, stage in enumerate(pipeline.stages):
            order.setdefault(stage.name, i)
    return order


def _by_stage(names: Iterable[str]) -> list[str]:
    order = stage_order()
    return sorted(set(names), key=lambda s: (order.get(s, len(order)), s))


def state_counts() -> list[StateCount]:
    """Jobs by kind, status and stage, now."""
    rows = Job.objects.values("kind", "status", "stage").annotate(n=Count("id")).order_by()
    order = stage_order()
    counts = [StateCount(r["kind"], r["status"], r["stage"], r["n"]) for r in rows]
    return sorted(counts, key=lambda c: (c.kind, order.get(c.stage, len(order)), c.stage, c.status))


def oldest_queued_age(now: datetime) -> float | None:
    """Seconds since the longest-waiting queued job entered the queue (backoffs included)."""
    oldest = Job.objects.filter(status=Status.QUEUED).aggregate(oldest=Min("queued_at"))["oldest"]
    return max(0.0, (now - oldest).total_seconds()) if oldest else None


def queue_waits(now: datetime, window: timedelta = DAY) -> dict[str, list[float]]:
    """Seconds from entering the queue to the claim, for claims in the window, by stage.

    Paired from the event log: each claim with the job's latest queue entry before it. Entries
    are read from one window earlier too, so a wait longer than the window is still measured.
    """
    since = now - window
    rows = list(
        JobEvent.objects.filter(
            kind=JobEvent.Kind.TRANSITION,
            name__in=[*QUEUE_ENTRIES, "retry_later", "claim"],
            at__gte=since - window,
            at__lte=now,
        )
        .order_by("-id")
        .values_list("id", "job_id", "name", "stage", "at")[: SAMPLE_LIMIT * 2]
    )
    rows.sort(key=lambda r: r[0])  # commit order per job
    entered: dict[Any, datetime | None] = {}
    waits: dict[str, list[float]] = defaultdict(list)
    for _, job_id, name, stage, at in rows:
        if name == "claim":
            start = entered.pop(job_id, None)
            if start is not None and at >= since:
                waits[stage].append(max(0.0, (at - start).total_seconds()))
        else:
            entered[job_id] = at if name in QUEUE_ENTRIES else None
    return waits


def stage_durations(now: datetime, window: timedelta = DAY) -> dict[str, list[float]]:
    """Seconds each completed attempt took, by stage (skipped stages did no work: left out)."""
    rows = (
        StageRun.objects.filter(finished_at__gte=now - window, finished_at__lte=now, outcome__in=COMPLETED)
        .order_by("-finished_at")
        .values_list("stage", "started_at", "finished_at")[:SAMPLE_LIMIT]
    )
    durations: dict[str, list[float]] = defaultdict(list)
    for stage, started, finished in rows:
        if finished is None:  # excluded by the filter; keeps the types honest
            continue
        durations[stage].append(max(0.0, (finished - started).total_seconds()))
    return durations


def stage_timings(now: datetime) -> list[StageTiming]:
    waits, durations = queue_waits(now), stage_durations(now)
    return [
        StageTiming(stage, Timing.of(waits.get(stage, [])), Timing.of(durations.get(stage, [])))
        for stage in _by_stage([*waits, *durations])
    ]


def cause_rates(now: datetime) -> list[CauseRates]:
    """Failed attempts, automatic retries and failed jobs by cause, last hour and last day."""
    hour, day = now - HOUR, now - DAY
    attempts = (
        StageRun.objects.filter(finished_at__gte=day, finished_at__lte=now, outcome__in=FAILED_ATTEMPTS)
        .values("error_code")
        .annotate(
            failed_day=Count("id"),
            failed_hour=Count("id", filter=Q(finished_at__gte=hour)),
            retried_day=Count("id", filter=Q(outcome=StageRun.Outcome.RETRY)),
            retried_hour=Count("id", filter=Q(outcome=StageRun.Outcome.RETRY, finished_at__gte=hour)),
        )
        .order_by()
    )
    jobs = (
        Job.objects.filter(status=Status.FAILED, finished_at__gte=day, finished_at__lte=now)
        .values("error_code")
        .annotate(day=Count("id"), hour=Count("id", filter=Q(finished_at__gte=hour)))
        .order_by()
    )
    by_cause: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in attempts:
        counts = by_cause[row["error_code"] or "unknown"]
        for key in ("failed_day", "failed_hour", "retried_day", "retried_hour"):
            counts[key] += row[key]
    for failed in jobs:
        counts = by_cause[failed["error_code"] or "unknown"]
        counts["jobs_day"] += failed["day"]
        counts["jobs_hour"] += failed["hour"]
    rates = []
    for code, c in by_cause.items():
        cause = get_cause(code)
        rates.append(
            CauseRates(
                cause=code,
                transient=cause.transient,
                user_retryable=cause.user_retryable,
                hour=CauseCounts(c["failed_hour"], c["retried_hour"], c["jobs_hour"]),
                day=CauseCounts(c["failed_day"], c["retried_day"], c["jobs_day"]),
            )
        )
    return sorted(rates, key=lambda r: (-r.day.failed_attempts, -r.day.failed_jobs, r.cause))


def attempt_rates(now: datetime, window: timedelta) -> AttemptRates:
    finished = StageRun.objects.filter(finished_at__gte=now - window, finished_at__lte=now).exclude(
        outcome__in=[StageRun.Outcome.RUNNING, StageRun.Outcome.SKIPPED]
    )
    counts = finished.aggregate(n=Count("id"), failed=Count("id", filter=Q(outcome__in=FAILED_ATTEMPTS)))
    return AttemptRates(finished=counts["n"], failed=counts["failed"])


def recoveries(now: datetime) -> list[ActorCount]:
    """Retries (automatic and by hand), take-overs and give-ups by who did them."""
    hour, day = now - HOUR, now - DAY
    rows = (
        JobEvent.objects.filter(
            kind=JobEvent.Kind.TRANSITION,
            name__in=["retry_later", "retry", "take_over", "give_up"],
            at__gte=day,
            at__lte=now,
        )
        .values("name", "actor")
        .annotate(day=Count("id"), hour=Count("id", filter=Q(at__gte=hour)))
        .order_by("name", "actor")
    )
    return [ActorCount(r["name"], r["actor"], r["hour"], r["day"]) for r in rows]


def tenant_loads(limit: int | None = None) -> tuple[list[TenantLoad], TenantLoad | None]:
    """Running and waiting jobs of the busiest ``limit`` tenants against their quotas.

    The rest are summed into one ``__other__`` row so totals still add up (and a metrics label
    never takes more than ``limit + 1`` values). Waiting counts uploaded and queued, as the
    queue quota does.
    """
    limit = TENANT_LIMIT if limit is None else limit
    waiting = [Status.UPLOADED, Status.QUEUED]
    rows = list(
        Job.objects.filter(status__in=[*LEASED, *waiting])
        .values("tenant")
        .annotate(
            running=Count("id", filter=Q(status__in=LEASED)),
            queued=Count("id", filter=Q(status__in=waiting)),
        )
        .order_by("-running", "-queued", "tenant")
    )
    loads = []
    for row in rows[:limit]:
        quota = quota_for(row["tenant"])
        loads.append(
            TenantLoad(row["tenant"], row["running"], row["queued"], quota.max_running, quota.max_queued)
        )
    rest = rows[limit:]
    other = None
    if rest:
        other = TenantLoad(
            OTHER_TENANTS, sum(r["running"] for r in rest), sum(r["queued"] for r in rest), None, None
        )
    return loads, other


def live_workers(now: datetime) -> list[LiveWorker]:
    """Live workers, idle or busy: each worker's idle heartbeat (``jobs/workers.py``)."""
    from jobs import workers

    return [LiveWorker(w.name, w.last_heartbeat, w.running) for w in workers.live_workers(now)]


def throughput(now: datetime, hours: int = 24) -> list[Bucket]:
    """Jobs that became ready or failed, and failed attempts, per hour for the last ``hours``."""
    end = now.replace(minute=0, second=0, microsecond=0)
    starts = [end - timedelta(hours=h) for h in range(hours - 1, -1, -1)]
    finished = (
        JobEvent.objects.filter(
            kind=JobEvent.Kind.TRANSITION,
            to_status__in=[Status.READY, Status.FAILED],
            at__gte=starts[0],
            at__lte=now,
        )
        .annotate(hour=TruncHour("at"))
        .values("hour", "to_status")
        .annotate(n=Count("id"))
        .order_by()
    )
    failed_runs = (
        StageRun.objects.filter(finished_at__gte=starts[0], finished_at__lte=now, outcome__in=FAILED_ATTEMPTS)
        .annotate(hour=TruncHour("finished_at"))
        .values("hour")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[datetime, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in finished:
        counts[row["hour"]][row["to_status"]] += row["n"]
    for run in failed_runs:
        counts[run["hour"]]["attempts"] += run["n"]
    return [
        Bucket(
            start,
            counts[start][Status.READY],
            counts[start][Status.FAILED],
            counts[start]["attempts"],
        )
        for start in starts
    ]


def snapshot(now: datetime | None = None) -> Health:
    """Every figure at once, for the health page and a metrics scrape."""
    now = now or timezone.now()
    states = state_counts()
    totals: dict[str, int] = {s.value: 0 for s in Status}
    for state in states:
        totals[state.status] = totals.get(state.status, 0) + state.count
    tenants, other = tenant_loads()
    return Health(
        at=now,
        states=states,
        stalled=totals.get(Status.STALLED, 0),
        oldest_queued_age=oldest_queued_age(now),
        timings=stage_timings(now),
        causes=cause_rates(now),
        attempts_hour=attempt_rates(now, HOUR),
        attempts_day=attempt_rates(now, DAY),
        recoveries=recoveries(now),
        tenants=tenants,
        other_tenants=other,
        workers=live_workers(now),
        throughput=throughput(now),
        status_totals=totals,
    )
