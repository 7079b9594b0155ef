"""The job engine's health figures, read from the database at the moment they are asked for.

The admin health page and ``/metrics`` show the same numbers because both call :func:`snapshot`.
Workers are other processes (other machines, even), so nothing here is counted in memory: every
figure is a query on the job table, the stage runs, the event log or the timing histograms.

A snapshot costs the same at 10 thousand and 10 million jobs: every query reads either what is
live (jobs not yet finished, through a partial index) or a recent window (the last hour or day,
through an index on its time), never the whole history:

- jobs by status: live counts for the statuses a job passes through (uploaded ... stalled);
  the final ones (ready, failed, cancelled) as the number of jobs that *entered* them in the last
  hour and day, from the event log;
- queue waits and stage durations: from the bucketed histograms ``jobs.timings`` keeps, the
  page's median and p95 interpolated from the last day's buckets (``/metrics`` exposes the
  all-time buckets as Prometheus histograms);
- failures, retries and recoveries by cause: the last hour and day; ``TENANT_LIMIT`` tenants;
  a cause that is the platform's fault alerts from its threshold of failed attempts an hour.
"""

# long-module: one snapshot of every figure the health page and /metrics show, so both read the
# same queries; splitting it would split figures that must agree.

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, Q
from django.db.models.functions import TruncHour
from django.utils import timezone

from jobs import pipelines, workers
from jobs.errors import Cause, get_cause
from jobs.models import FINISHED, LEASED, Job, JobEvent, StageRun, Status
from jobs.quotas import quota_for
from jobs.timings import DURATION, WAIT, Histogram, histograms

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TENANT_LIMIT = 50
OTHER_TENANTS = "__other__"

# Statuses a job passes through: counted live. The final ones are counted as entries in a window.
ACTIVE = tuple(s for s in Status if s not in FINISHED)
FAILED_ATTEMPTS = (StageRun.Outcome.RETRY, StageRun.Outcome.FAILED, StageRun.Outcome.LOST)


@dataclass(frozen=True)
class Timing:
    """Median and p95 interpolated from a histogram's buckets (exact only to the bucket)."""

    samples: int
    median: float | None
    p95: float | None

    @classmethod
    def of(cls, histogram: Histogram) -> Timing:
        return cls(histogram.count, histogram.quantile(0.5), histogram.quantile(0.95))


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
class StageHistograms:
    """A stage's all-time histograms (every kind summed), for ``/metrics``."""

    stage: str
    wait: Histogram
    duration: Histogram


@dataclass(frozen=True)
class FinishedCount:
    """Jobs that entered a final status (ready, failed, cancelled) in the last hour and day."""

    status: str
    hour: int
    day: int


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
    alert_from: int = 0  # failed attempts an hour that raise an alert (0: this cause never does)
    operator_hint: str = ""

    @property
    def alerting(self) -> bool:
        return 0 < self.alert_from <= self.hour.failed_attempts


def alert_threshold(cause: Cause) -> int:
    """Failed attempts an hour from which ``cause`` raises an alert: ``JOBS_CAUSE_ALERTS``, or
    the cause's own (0: never)."""
    alerts: dict[str, int] = settings.JOBS_CAUSE_ALERTS
    return alerts.get(cause.code, cause.alert_hour)


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
    status_totals: dict[str, int] = field(default_factory=dict)  # the ACTIVE statuses, now
    finished: list[FinishedCount] = field(default_factory=list)
    histograms: list[StageHistograms] = field(default_factory=list)

    @property
    def alerts(self) -> list[CauseRates]:
        """Causes failing often enough in the last hour to need an operator."""
        return [rates for rates in self.causes if rates.alerting]


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
    """Jobs not yet finished by kind, status and stage, now (the partial index job_health_active)."""
    rows = (
        Job.objects.filter(status__in=ACTIVE)
        .values("kind", "status", "stage")
        .annotate(n=Count("id"))
        .order_by()
    )
    order = stage_order()
    counts = [StateCount(r["kind"], r["status"], r["stage"], r["n"]) for r in rows]
    return sorted(counts, key=lambda c: (c.kind, order.get(c.stage, len(order)), c.stage, c.status))


def oldest_queued_age(now: datetime) -> float | None:
    """Seconds since the longest-waiting queued job entered the queue (backoffs included)."""
    oldest = Job.objects.filter(status=Status.QUEUED).aggregate(oldest=Min("queued_at"))["oldest"]
    return max(0.0, (now - oldest).total_seconds()) if oldest else None


def finished_counts(now: datetime) -> list[FinishedCount]:
    """Jobs that became ready, failed or cancelled in the last hour and day, from the event log
    (a range of its ``at`` index): the final statuses only grow, so a live count of them would
    read the whole history."""
    hour, day = now - HOUR, now - DAY
    rows = (
        JobEvent.objects.filter(
            kind=JobEvent.Kind.TRANSITION, to_status__in=FINISHED, at__gt=day, at__lte=now
        )
        .values("to_status")
        .annotate(day=Count("id"), hour=Count("id", filter=Q(at__gt=hour)))
        .order_by()
    )
    counts = {r["to_status"]: (r["hour"], r["day"]) for r in rows}
    return [FinishedCount(s.value, *counts.get(s.value, (0, 0))) for s in FINISHED]


def stage_timings(now: datetime) -> list[StageTiming]:
    """Queue wait and duration per stage over the last day (whole hours: the buckets' hours
    from the one 24 hours ago to now), interpolated from the timing histograms."""
    day = histograms(since=now - DAY)
    empty = Histogram.empty()
    return [
        StageTiming(
            stage, Timing.of(day.get((stage, WAIT), empty)), Timing.of(day.get((stage, DURATION), empty))
        )
        for stage in _by_stage(stage for stage, _ in day)
    ]


def stage_histograms() -> list[StageHistograms]:
    """Every stage's all-time wait and duration histograms (the running totals)."""
    total = histograms()
    empty = Histogram.empty()
    return [
        StageHistograms(stage, total.get((stage, WAIT), empty), total.get((stage, DURATION), empty))
        for stage in _by_stage(stage for stage, _ in total)
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
                alert_from=alert_threshold(cause),
                operator_hint=cause.operator_hint,
            )
        )
    return sorted(rates, key=lambda r: (-r.day.failed_attempts, -r.day.failed_jobs, r.cause))


def attempt_rates(now: datetime) -> tuple[AttemptRates, AttemptRates]:
    """Finished attempts and the failed among them, the last hour and the last day (one query)."""
    hour = Q(finished_at__gte=now - HOUR)
    failed = Q(outcome__in=FAILED_ATTEMPTS)
    finished = StageRun.objects.filter(finished_at__gte=now - DAY, finished_at__lte=now).exclude(
        outcome__in=[StageRun.Outcome.RUNNING, StageRun.Outcome.SKIPPED]
    )
    c = finished.aggregate(
        n=Count("id"),
        failed=Count("id", filter=failed),
        n_hour=Count("id", filter=hour),
        failed_hour=Count("id", filter=hour & failed),
    )
    return AttemptRates(c["n_hour"], c["failed_hour"]), AttemptRates(c["n"], c["failed"])


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
        # status IN (...) lies inside job_health_active's predicate: read from that index.
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
    totals: dict[str, int] = {s.value: 0 for s in ACTIVE}
    for state in states:
        totals[state.status] = totals.get(state.status, 0) + state.count
    tenants, other = tenant_loads()
    attempts_hour, attempts_day = attempt_rates(now)
    return Health(
        at=now,
        states=states,
        stalled=totals.get(Status.STALLED, 0),
        oldest_queued_age=oldest_queued_age(now),
        timings=stage_timings(now),
        causes=cause_rates(now),
        attempts_hour=attempts_hour,
        attempts_day=attempts_day,
        recoveries=recoveries(now),
        tenants=tenants,
        other_tenants=other,
        workers=live_workers(now),
        throughput=throughput(now),
        status_totals=totals,
        finished=finished_counts(now),
        histograms=stage_histograms(),
    )
