"""Queue waits and stage durations as bounded histograms (the ``TimingBucket`` table).

A worker adds one value per claim (the wait: from entering the queue to the claim) and per
completed stage run (its duration), with one UPSERT inside the transaction it already has open.
Each value lands in a fixed bucket of its hour and of the all-time total. Readers get a bounded
number of rows (stages x hours x buckets) whatever the number of jobs, and read percentiles by
interpolating inside the bucket, as Prometheus' ``histogram_quantile`` does.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Sum

from jobs.models import Job, StageRun, TimingBucket

WAIT = "wait"
DURATION = "duration"
# Upper bounds in seconds (Prometheus' ``le``); one more bucket, +Inf, follows. Changing them
# re-labels stored rows: only ever append, or empty the table with the change.
BOUNDS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
)  # fmt: skip
# The ``hour`` of the all-time rows: before every real hour, so a window never includes them.
ALL_TIME = datetime(1970, 1, 1, tzinfo=UTC)
COMPLETED = (StageRun.Outcome.ADVANCED, StageRun.Outcome.READY)


def bucket_of(seconds: float) -> int:
    """Index of the first bucket whose upper bound is >= ``seconds`` (len(BOUNDS): +Inf)."""
    return bisect.bisect_left(BOUNDS, seconds)


def hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


class Timing(NamedTuple):
    """One value to count: ``seconds`` of ``metric`` for ``kind``/``stage``, measured at ``at``."""

    kind: str
    stage: str
    metric: str
    seconds: float
    at: datetime


def timing_record(*, kind: str, stage: str, metric: str, seconds: float, at: datetime) -> None:
    """Count ``seconds`` in its bucket of ``at``'s hour and of the all-time total: one statement.

    Call it inside the transaction that records what is measured, so the figure commits (or
    rolls back) with it. The two rows are always locked in the same order (hour, then all-time),
    so concurrent writers wait for each other but never deadlock.
    """
    timing = Timing(kind, stage, metric, seconds, at)
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * 2)
    sql = f"INSERT INTO {_table()} ({', '.join(_columns())}) VALUES {values} {upsert_clause()}"
    with connection.cursor() as cursor:
        cursor.execute(sql, timing_params(timing))


def timing_params(timing: Timing) -> list[Any]:
    """The parameters of the two rows (the hour's, then the all-time one) that count ``timing``."""
    seconds = max(0.0, timing.seconds)
    bucket = bucket_of(seconds)
    adapt = connection.ops.adapt_datetimefield_value
    rows = [
        (timing.kind, timing.stage, timing.metric, adapt(hour), bucket, 1, seconds)
        for hour in (hour_of(timing.at), ALL_TIME)
    ]
    return [v for row in rows for v in row]


def timing_insert_sql(condition: str) -> str:
    """The upsert of :func:`timing_params`' two rows as a statement that may stand inside a
    ``WITH`` (PostgreSQL), counting only when ``condition`` (SQL) holds."""
    fields = [TimingBucket._meta.get_field(name) for name in _NAMES]
    row = ", ".join(f"CAST(%s AS {field.db_type(connection)})" for field in fields)
    return (
        f"INSERT INTO {_table()} ({', '.join(_columns())}) "
        f"SELECT v.* FROM (VALUES ({row}), ({row})) AS v WHERE {condition} {upsert_clause()}"
    )


_NAMES = ("kind", "stage", "metric", "hour", "bucket", "count", "total")


def _table() -> str:
    return connection.ops.quote_name(TimingBucket._meta.db_table)


def _columns() -> list[str]:
    columns = {f.name: str(f.column) for f in TimingBucket._meta.concrete_fields}
    return [connection.ops.quote_name(columns[name]) for name in _NAMES]


def upsert_clause() -> str:
    kind_, stage_, metric_, hour_, bucket_, count_, total_ = _columns()
    table = _table()
    return (
        f"ON CONFLICT ({hour_}, {kind_}, {stage_}, {metric_}, {bucket_}) DO UPDATE SET "
        f"{count_} = {table}.{count_} + excluded.{count_}, {total_} = {table}.{total_} + excluded.{total_}"
    )


def timing_of_claim(job: Job) -> Timing | None:
    """What a claim counts: how long the job waited in the queue for this stage.

    A job that the retry policy sent back to the queue (``retry_later``, the only way a queued
    job keeps an error code) waited for its backoff, a delay chosen on purpose: not counted.
    """
    if job.error_code or job.queued_at is None or job.heartbeat_at is None:
        return None
    seconds = (job.heartbeat_at - job.queued_at).total_seconds()
    return Timing(job.kind, job.stage, WAIT, seconds, job.heartbeat_at)


def timing_of_run(*, kind: str, run: StageRun, outcome: str, at: datetime) -> Timing | None:
    """What a closed stage run counts: a completed attempt's duration (skips, failures and
    cancels did not complete the work, so they are not durations of it)."""
    if outcome not in COMPLETED:
        return None
    return Timing(kind, run.stage, DURATION, (at - run.started_at).total_seconds(), at)


def timing_claimed(job: Job) -> None:
    """The hook of a claim: count its queue wait (:func:`timing_of_claim`)."""
    timing = timing_of_claim(job)
    if timing is not None:
        timing_record(**timing._asdict())


def timing_run_finished(*, kind: str, run: StageRun, outcome: str, at: datetime) -> None:
    """The hook of a closed stage run: count its duration (:func:`timing_of_run`)."""
    timing = timing_of_run(kind=kind, run=run, outcome=outcome, at=at)
    if timing is not None:
        timing_record(**timing._asdict())


@dataclass(frozen=True)
class Histogram:
    """Counts per bucket (not cumulative; the last one is +Inf) and the sum of the values."""

    counts: tuple[int, ...]
    total: float = 0.0

    @classmethod
    def empty(cls) -> Histogram:
        return cls((0,) * (len(BOUNDS) + 1))

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(le, count of values <= le)`` per bucket, +Inf last: Prometheus' ``_bucket`` series."""
        running, out = 0, []
        for le, n in zip([*BOUNDS, float("inf")], self.counts, strict=True):
            running += n
            out.append((le, running))
        return out

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) interpolated linearly inside its bucket; ``None`` when empty.

        A quantile in the +Inf bucket answers the highest finite bound, as Prometheus does.
        """
        n = self.count
        if not n:
            return None
        rank = q * n
        below = 0
        for i, here in enumerate(self.counts):
            if here and below + here >= rank:
                if i == len(BOUNDS):
                    return BOUNDS[-1]
                lower = BOUNDS[i - 1] if i else 0.0
                return lower + (BOUNDS[i] - lower) * max(0.0, rank - below) / here
            below += here
        return BOUNDS[-1]


def histograms(since: datetime | None = None) -> dict[tuple[str, str], Histogram]:
    """``(stage, metric)`` -> the histogram over every kind: since the start of ``since``'s hour,
    or all time when ``since`` is None. One query over at most stages x metrics x buckets rows
    per hour of the window."""
    rows = (
        TimingBucket.objects.filter(hour=ALL_TIME)
        if since is None
        else TimingBucket.objects.filter(hour__gte=hour_of(since))
    )
    summed = rows.values("stage", "metric", "bucket").annotate(n=Sum("count"), s=Sum("total")).order_by()
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * (len(BOUNDS) + 1))
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for row in summed:
        key = (row["stage"], row["metric"])
        counts[key][min(row["bucket"], len(BOUNDS))] += row["n"]
        totals[key] += row["s"]
    return {key: Histogram(tuple(c), totals[key]) for key, c in counts.items()}


def timing_prune(*, before: datetime) -> int:
    """Delete hourly rows older than ``before`` (the all-time rows stay); returns how many.

    Readers never need them once they are older than the longest window (a day), and they are
    few (stages x buckets per hour): a periodic job may call this, nothing depends on it.
    """
    deleted, _ = TimingBucket.objects.filter(hour__lt=hour_of(before)).exclude(hour=ALL_TIME).delete()
    return deleted
