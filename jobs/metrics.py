"""``/metrics``: the health figures in the Prometheus text format, computed at scrape time.

A custom collector asks the database on every scrape (``jobs.health.snapshot``) instead of
counting in this process: workers and the reaper are other processes, often on other machines,
so only the database knows. Counts are gauges of the current state or of a named window
(``window="1h"`` / ``"24h"``); queue waits and stage durations are real Prometheus histograms
(``_bucket{le=...}``, ``_sum``, ``_count``, monotonic since the table began) read from the bounded
timing table, so ``histogram_quantile(0.95, rate(..._bucket[1h]))`` works as usual. Label values
are bounded (statuses, stages, causes, and at most ``TENANT_LIMIT`` tenants plus ``__other__``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from jobs.errors import all_causes
from jobs.health import Health, TenantLoad, alert_threshold, snapshot
from jobs.timings import Histogram


def _histogram(name: str, doc: str, by_stage: list[tuple[str, Histogram]]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=["stage"])
    for stage, histogram in by_stage:
        buckets = [(floatToGoString(le), n) for le, n in histogram.cumulative()]
        family.add_metric([stage], buckets, sum_value=histogram.total)
    return family


def _tenants(health: Health) -> Iterator[Metric]:
    loads: list[TenantLoad] = [*health.tenants, *([health.other_tenants] if health.other_tenants else [])]
    running = GaugeMetricFamily(
        "jobs_tenant_running", "Running jobs of a tenant (busiest 50, then __other__).", labels=["tenant"]
    )
    waiting = GaugeMetricFamily(
        "jobs_tenant_waiting", "Uploaded and queued jobs of a tenant.", labels=["tenant"]
    )
    running_limit = GaugeMetricFamily(
        "jobs_tenant_running_limit", "A tenant's running-jobs quota.", labels=["tenant"]
    )
    waiting_limit = GaugeMetricFamily(
        "jobs_tenant_waiting_limit", "A tenant's waiting-jobs quota.", labels=["tenant"]
    )
    for load in loads:
        running.add_metric([load.tenant], load.running)
        waiting.add_metric([load.tenant], load.queued)
        if load.max_running is not None:
            running_limit.add_metric([load.tenant], load.max_running)
        if load.max_queued is not None:
            waiting_limit.add_metric([load.tenant], load.max_queued)
    yield from (running, waiting, running_limit, waiting_limit)


def _causes(health: Health) -> Iterator[Metric]:
    families = {
        "failed_attempts": GaugeMetricFamily(
            "jobs_failed_attempts",
            "Attempts that ended with a failure cause in the window.",
            labels=["cause", "window"],
        ),
        "retried": GaugeMetricFamily(
            "jobs_retried_attempts",
            "Failed attempts the retry policy retried automatically.",
            labels=["cause", "window"],
        ),
        "failed_jobs": GaugeMetricFamily(
            "jobs_failed_jobs",
            "Jobs now failed with this cause that failed in the window.",
            labels=["cause", "window"],
        ),
    }
    for rates in health.causes:
        for window, counts in (("1h", rates.hour), ("24h", rates.day)):
            for attr, family in families.items():
                family.add_metric([rates.cause, window], getattr(counts, attr))
    yield from families.values()
    # Every cause that can alert, zeros included, so that a rule on "== 1" sees it clear again.
    alerting = GaugeMetricFamily(
        "jobs_cause_alerting",
        "1 while a cause's failed attempts in the last hour are at or above its alert threshold.",
        labels=["cause"],
    )
    threshold = GaugeMetricFamily(
        "jobs_cause_alert_threshold", "Failed attempts an hour from which a cause alerts.", labels=["cause"]
    )
    by_code = {rates.cause: rates for rates in health.causes}
    for cause in all_causes():
        limit = alert_threshold(cause)
        if limit > 0:
            found = by_code.get(cause.code)
            alerting.add_metric([cause.code], 1 if found is not None and found.alerting else 0)
            threshold.add_metric([cause.code], limit)
    yield alerting
    yield threshold


def collect_health(health: Health) -> Iterator[Metric]:
    """The metric families for one snapshot (split out so tests can feed a snapshot)."""
    by_status = GaugeMetricFamily(
        "jobs_in_status",
        "Jobs not yet finished by status, now (zeros included); finished ones: jobs_finished.",
        labels=["status"],
    )
    for status, count in health.status_totals.items():
        by_status.add_metric([status], count)
    yield by_status
    entered_final = GaugeMetricFamily(
        "jobs_finished",
        "Jobs that became ready, failed or cancelled in the window.",
        labels=["status", "window"],
    )
    for entered in health.finished:
        entered_final.add_metric([entered.status, "1h"], entered.hour)
        entered_final.add_metric([entered.status, "24h"], entered.day)
    yield entered_final
    by_state = GaugeMetricFamily(
        "jobs_by_state",
        "Jobs not yet finished by kind, status and stage, now.",
        labels=["kind", "status", "stage"],
    )
    for state in health.states:
        by_state.add_metric([state.kind, state.status, state.stage], state.count)
    yield by_state
    yield GaugeMetricFamily(
        "jobs_stalled", "Stalled jobs (lease expired) waiting for a decision.", value=health.stalled
    )
    yield GaugeMetricFamily(
        "jobs_oldest_queued_age_seconds",
        "Seconds since the longest-waiting queued job entered the queue (0 when none is queued).",
        value=health.oldest_queued_age or 0.0,
    )
    yield _histogram(
        "jobs_queue_wait_seconds",
        "Seconds from entering the queue to the claim (retry backoffs not counted).",
        [(h.stage, h.wait) for h in health.histograms],
    )
    yield _histogram(
        "jobs_stage_duration_seconds",
        "Seconds a completed attempt of a stage took (skipped stages not counted).",
        [(h.stage, h.duration) for h in health.histograms],
    )
    yield from _causes(health)
    finished = GaugeMetricFamily(
        "jobs_finished_attempts", "Attempts that finished in the window.", labels=["window"]
    )
    failed = GaugeMetricFamily(
        "jobs_failed_attempts_all", "Attempts that failed in the window, any cause.", labels=["window"]
    )
    for window, rates in (("1h", health.attempts_hour), ("24h", health.attempts_day)):
        finished.add_metric([window], rates.finished)
        failed.add_metric([window], rates.failed)
    yield finished
    yield failed
    recoveries = GaugeMetricFamily(
        "jobs_recoveries",
        "Retries (retry_later: automatic), take-overs and give-ups in the window, by actor.",
        labels=["transition", "actor", "window"],
    )
    for r in health.recoveries:
        recoveries.add_metric([r.name, r.actor, "1h"], r.hour)
        recoveries.add_metric([r.name, r.actor, "24h"], r.day)
    yield recoveries
    yield from _tenants(health)
    yield GaugeMetricFamily(
        "jobs_live_workers",
        "Workers with a heartbeat within the last lease period.",
        value=len(health.workers),
    )


class JobsCollector(Collector):
    """Reads the database at scrape time."""

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        yield from collect_health(snapshot())
        yield GaugeMetricFamily(
            "jobs_metrics_query_seconds",
            "Seconds this scrape spent querying the database.",
            value=time.monotonic() - started,
        )


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(JobsCollector())


def render() -> bytes:
    """The exposition text of one scrape."""
    return generate_latest(REGISTRY)
