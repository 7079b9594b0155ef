"""The health figures (jobs.health) against what the services did, and the health page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import health
from jobs.admin.chart import nice_ceiling, throughput_svg
from jobs.admin.health import tiles as health_tiles
from jobs.health import Bucket, snapshot
from jobs.models import Job, TimingBucket
from jobs.services.reaper import reap
from jobs.services.worker import job_claim, job_complete_stage
from jobs.timings import ALL_TIME, BOUNDS, DURATION, WAIT, Histogram, bucket_of, hour_of, timing_prune
from tests.jobs import helpers as jh
from tests.jobs.helpers import new_job
from tests.ops.conftest import VIEW, login, make_staff
from tests.ops.helpers import complete, fail, tenant

# --- pure parts: no database ---------------------------------------------------------------------


INF = float("inf")


def histogram(by_le: dict[float, int]) -> Histogram:
    """A histogram with ``n`` values in the bucket of each upper bound ``le``."""
    counts = [0] * (len(BOUNDS) + 1)
    for le, n in by_le.items():
        counts[len(BOUNDS) if le == INF else BOUNDS.index(le)] = n
    return Histogram(tuple(counts))


def test_values_fall_into_the_bucket_whose_upper_bound_holds_them():
    assert [bucket_of(v) for v in (0.0, 0.01, 0.011, 4.0, 5.0, 86400.0, 86400.5)] == [
        0,
        0,
        1,
        BOUNDS.index(5.0),
        BOUNDS.index(5.0),
        len(BOUNDS) - 1,
        len(BOUNDS),
    ]


def test_quantiles_are_interpolated_inside_their_bucket_as_prometheus_does():
    assert Histogram.empty().quantile(0.5) is None
    # 100 values in (30, 60]: the median is halfway through the bucket, p95 at 95% of it.
    h = histogram({60.0: 100})
    assert (h.quantile(0.5), h.quantile(0.95)) == (45.0, pytest.approx(58.5))
    # 1 in [0, 0.01], 1 in (5, 10], 1 in (15, 30]: rank 1.5 is in the second, 2.85 in the third.
    h = histogram({0.01: 1, 10.0: 1, 30.0: 1})
    assert (h.quantile(0.5), h.quantile(0.95)) == (7.5, pytest.approx(27.75))
    assert histogram({INF: 3}).quantile(0.5) == BOUNDS[-1]  # past the last bound: the last bound
    assert histogram({5.0: 1, 10.0: 1}).cumulative()[BOUNDS.index(5.0) : BOUNDS.index(10.0) + 1] == [
        (5.0, 1),
        (10.0, 2),
    ]


def test_nice_ceiling():
    assert [nice_ceiling(v) for v in (0, 1, 2, 3, 7, 10, 11, 42, 180)] == [1, 1, 2, 5, 10, 10, 20, 50, 200]


def test_the_chart_is_well_formed_svg_with_bars_to_scale():
    from datetime import UTC, datetime

    start = datetime(2026, 1, 1, tzinfo=UTC)
    buckets = [
        Bucket(start + timedelta(hours=h), ready=h, failed=h % 3, failed_attempts=h % 5) for h in range(24)
    ]
    svg = str(throughput_svg(buckets))
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    groups = root.findall(f"{ns}g")
    assert len(groups) == 24
    last_ready = groups[-1].findall(f"{ns}rect")[1]
    first_ready = groups[0].findall(f"{ns}rect")[1]
    assert float(first_ready.get("height")) == 0
    assert float(last_ready.get("height")) == pytest.approx((240 - 30 - 34) * 23 / 50, abs=0.1)
    assert "2026-01-01 23:00 UTC: 23 ready, 2 failed, 3 failed attempts" in groups[-1].find(f"{ns}title").text
    assert root.get("aria-label").startswith("Per hour, last 24 hours: 276 jobs ready")


def test_an_empty_chart_is_empty():
    assert throughput_svg([]) == ""


# --- figures from the database ----------------------------------------------------------------


def run_job_with_timings(clock, wait: float, took: float) -> None:
    job = new_job()
    clock.advance(wait)
    claim = job_claim(job_id=job.pk, worker="w1")
    assert claim is not None
    clock.advance(took)
    job_complete_stage(claim=claim, continue_inline=False)


@pytest.mark.django_db
def test_queue_wait_and_stage_duration_per_stage(clock):
    run_job_with_timings(clock, wait=10, took=30)
    run_job_with_timings(clock, wait=20, took=50)
    # A backoff is the policy's choice, not a queue: a retried attempt's wait is not counted.
    claim = jh.running()
    clock.advance(1)
    fail(claim, "internal_error")
    clock.advance(300)
    job_claim(job_id=claim.job_id, worker="w2")
    timings = {t.stage: t for t in snapshot().timings}
    prepare = timings["prepare"]
    # 10 s, 20 s and the retried job's first claim (0 s); not its claim after the backoff. The
    # figures are interpolated in the buckets [0, 0.01], (5, 10], (15, 30] (see the unit test).
    assert (prepare.wait.samples, prepare.wait.median, prepare.wait.p95) == (3, 7.5, pytest.approx(27.75))
    # 30 s in (15, 30], 50 s in (30, 60].
    assert (prepare.duration.samples, prepare.duration.median) == (2, 30.0)
    assert prepare.duration.p95 == pytest.approx(57.0)
    assert "pages" not in timings  # advanced to, never claimed: nothing to measure yet


def buckets(metric: str, stage: str = "prepare") -> dict[tuple[object, int], tuple[int, float]]:
    rows = TimingBucket.objects.filter(metric=metric, stage=stage)
    return {(r.hour, r.bucket): (r.count, r.total) for r in rows}


@pytest.mark.django_db
def test_a_claim_counts_its_queue_wait_in_the_histogram_of_its_hour_and_of_all_time(clock):
    job = new_job()
    clock.advance(12)
    claim = job_claim(job_id=job.pk, worker="w1")
    assert claim is not None
    hour = hour_of(timezone.now())
    assert buckets(WAIT) == {(hour, bucket_of(12)): (1, 12.0), (ALL_TIME, bucket_of(12)): (1, 12.0)}
    assert buckets(DURATION) == {}  # nothing completed yet
    second = new_job()
    clock.advance(14)  # (10, 15]: the same bucket, one more count, both values in the sum
    assert job_claim(job_id=second.pk, worker="w2") is not None
    assert buckets(WAIT)[(ALL_TIME, bucket_of(12))] == (2, 26.0)


@pytest.mark.django_db
def test_a_completed_stage_run_counts_its_duration_and_a_failed_one_does_not(clock):
    claim = jh.running()
    clock.advance(40)
    job_complete_stage(claim=claim, continue_inline=False)
    hour = hour_of(timezone.now())
    assert buckets(DURATION) == {(hour, bucket_of(40)): (1, 40.0), (ALL_TIME, bucket_of(40)): (1, 40.0)}
    failing = jh.running()
    clock.advance(7)
    fail(failing, "corrupt_input")
    assert sum(n for n, _ in buckets(DURATION).values()) == 2  # still the one run, twice (hour, all)


@pytest.mark.django_db
def test_the_page_percentiles_come_from_the_buckets_of_the_last_day(viewer, clock):
    now = timezone.now()
    prepare = bucket_of(60.0)  # (30, 60]
    for hour, count in ((hour_of(now), 60), (hour_of(now) - timedelta(hours=5), 40)):
        TimingBucket.objects.create(
            kind="test.pipeline", stage="prepare", metric=DURATION, hour=hour, bucket=prepare, count=count
        )
    # Older than the day's window, and the all-time total: neither is in the page's figures.
    for hour in (hour_of(now) - timedelta(hours=25), ALL_TIME):
        TimingBucket.objects.create(
            kind="test.pipeline", stage="prepare", metric=DURATION, hour=hour, bucket=0, count=1000
        )
    timing = {t.stage: t for t in snapshot().timings}["prepare"]
    assert (timing.duration.samples, timing.duration.median) == (100, 45.0)
    assert timing.duration.p95 == pytest.approx(58.5) and timing.wait.samples == 0
    html = viewer.get("/admin/jobs/job/health/").content.decode()
    assert '<td>prepare</td><td class="num">0</td>' in html
    assert '<td class="num">100</td><td class="num">45s</td><td class="num">58s</td>' in html


def jobs_in_every_state(n: int) -> None:
    """``n`` finished jobs of each final status (ready, failed, cancelled) and a few live ones."""
    for _ in range(n):
        complete(job_claim(job_id=new_job().pk, worker="w1"))
        fail(jh.running(), "corrupt_input")
        jh.cancel_requested()
    new_job(), jh.running()


@pytest.mark.django_db
def test_a_snapshot_makes_the_same_queries_at_two_sizes(django_assert_num_queries):
    jobs_in_every_state(2)
    with CaptureQueriesContext(connection) as small:
        snapshot()
    jobs_in_every_state(20)
    assert Job.objects.count() > 60
    with CaptureQueriesContext(connection) as large:
        snapshot()
    assert len(small) == len(large)
    with django_assert_num_queries(len(small)):  # and no query more per job, status or stage
        snapshot()


@pytest.mark.django_db
def test_failure_and_retry_rates_by_cause_over_the_hour_and_the_day(clock):
    fail(jh.running(), "corrupt_input")
    clock.advance(2 * 3600)
    fail(jh.running(), "corrupt_input")
    fail(jh.running(), "corrupt_input")
    fail(jh.running(), "internal_error")  # retried automatically
    lost = jh.running(worker="gone")
    clock.advance(60)
    reap()  # its lease expired: stalled, the attempt lost
    causes = {c.cause: c for c in snapshot().causes}
    corrupt = causes["corrupt_input"]
    assert (corrupt.hour.failed_attempts, corrupt.hour.retried, corrupt.hour.failed_jobs) == (2, 0, 2)
    assert (corrupt.day.failed_attempts, corrupt.day.failed_jobs) == (3, 3)
    assert not corrupt.transient and not corrupt.user_retryable
    assert (causes["internal_error"].hour.failed_attempts, causes["internal_error"].hour.retried) == (1, 1)
    assert causes["worker_lost"].hour.failed_attempts == 1
    rates = snapshot()
    assert (rates.attempts_hour.failed, rates.attempts_hour.finished) == (4, 4)
    assert rates.stalled == 1 and lost.job_id
    recoveries = {(r.name, r.actor): (r.hour, r.day) for r in rates.recoveries}
    assert recoveries[("retry_later", "worker")] == (1, 1)


@pytest.mark.django_db
def test_oldest_queued_age_and_throughput_per_hour(clock):
    failed_at = clock.now
    fail(jh.running(), "corrupt_input")
    clock.advance(3 * 3600)
    waiting = new_job()
    clock.advance(90)
    complete(job_claim(job_id=new_job().pk, worker="w1"))
    figures = snapshot()
    assert figures.oldest_queued_age == pytest.approx(90, abs=0.01) and waiting
    by_hour = {b.start: b for b in figures.throughput}
    assert len(figures.throughput) == 24
    assert figures.throughput[-1].ready == 1
    failed_bucket = by_hour[failed_at.replace(minute=0, second=0, microsecond=0)]
    assert (failed_bucket.failed, failed_bucket.failed_attempts) == (1, 1)


def claimed(tenant_key: str, worker: str = "w1"):
    claim = job_claim(job_id=new_job(tenant=tenant_key).pk, worker=worker)
    assert claim is not None
    return claim


@pytest.mark.django_db
def test_tenants_against_their_quotas_capped_with_the_rest_summed(monkeypatch):
    tenant("acme", max_running_jobs=2, max_queued_jobs=3)
    tenant("globex", max_running_jobs=1, max_queued_jobs=1)
    claimed("acme"), claimed("acme")
    new_job(tenant="acme")
    new_job(tenant="globex")
    claimed("initech")  # no tenant row: no quota
    loads = {t.tenant: t for t in snapshot().tenants}
    assert (
        loads["acme"].running,
        loads["acme"].queued,
        loads["acme"].max_running,
        loads["acme"].max_queued,
    ) == (
        2,
        1,
        2,
        3,
    )
    assert loads["acme"].at_running_limit and not loads["acme"].at_queued_limit
    assert loads["globex"].at_queued_limit and loads["initech"].max_running is None
    monkeypatch.setattr(health, "TENANT_LIMIT", 1)
    figures = snapshot()
    assert [t.tenant for t in figures.tenants] == ["acme"]
    assert figures.other_tenants is not None
    assert (figures.other_tenants.tenant, figures.other_tenants.running, figures.other_tenants.queued) == (
        "__other__",
        1,
        1,
    )


@pytest.mark.django_db
def test_live_workers_are_those_with_a_heartbeat_within_one_lease(clock, settings):
    settings.JOBS_LEASE_SECONDS = 30
    claimed("acme", worker="old-host:1")
    clock.advance(45)
    claimed("acme", worker="host-a:1")
    claimed("acme", worker="host-a:1")
    claimed("acme", worker="host-b:2")
    workers = {w.name: w.running for w in snapshot().workers}
    assert workers == {"host-a:1": 2, "host-b:2": 1}


# --- the page -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_health_page_shows_the_figures_to_staff_who_may_view_jobs(viewer, clock):
    tenant("acme", max_running_jobs=2)
    stalled_claim = claimed("acme", worker="host-z:9")
    clock.advance(3600)
    reap()
    claimed("acme", worker="host-a:1")
    claimed("acme", worker="host-a:1")
    fail(claimed("globex"), "corrupt_input")
    html = viewer.get("/admin/jobs/job/health/").content.decode()
    for expected in (
        "Job health",
        'id="jobs-chart"',
        "<svg",
        "Stalled",
        "corrupt_input",
        "operator only",
        'href="/admin/documents/tenant/?q=acme"',
        "at limit",
        "host-a:1",
        "Queue wait and stage duration",
        "test.pages",
        "Jobs not yet finished",
        "Failed, 24 h",
        "entered in the last 24 h (1 in the last hour)",
    ):
        assert expected in html, expected
    assert stalled_claim.job_id


@pytest.mark.django_db
def test_the_health_page_needs_the_view_permission(client, django_user_model):
    assert client.get("/admin/jobs/job/health/").status_code == 302  # to the login page
    client.force_login(make_staff("nobody"))
    assert client.get("/admin/jobs/job/health/").status_code == 403
    assert login(make_staff("someone", VIEW)).get("/admin/jobs/job/health/").status_code == 200


@pytest.mark.django_db
def test_pruning_drops_old_hours_and_keeps_the_all_time_totals():
    now = hour_of(timezone.now())
    for hour in (now, now - timedelta(hours=30), ALL_TIME):
        TimingBucket.objects.create(kind="k", stage="prepare", metric=WAIT, hour=hour, bucket=1, count=1)
    assert timing_prune(before=now - timedelta(days=1)) == 1
    assert set(TimingBucket.objects.values_list("hour", flat=True)) == {now, ALL_TIME}


@pytest.mark.django_db
def test_one_running_job_is_counted_in_the_singular_on_the_workers_tile():
    jh.running(worker="host-a:1")
    workers = next(tile for tile in health_tiles(snapshot()) if tile.label == "Live workers")
    assert workers.note == "idle or busy; 1 job running"
    jh.running(worker="host-a:1")
    workers = next(tile for tile in health_tiles(snapshot()) if tile.label == "Live workers")
    assert workers.note == "idle or busy; 2 jobs running"


@pytest.mark.django_db
def test_a_cause_that_is_the_platforms_fault_alerts_from_its_threshold_for_an_hour(clock, viewer):
    page = "/admin/jobs/job/health/"
    fail(jh.running(), "sandbox_failed")
    fail(jh.running(), "sandbox_failed")
    for _ in range(5):
        fail(jh.running(), "corrupt_input")  # the file's fault: however often, never an alert
    assert snapshot().alerts == []
    assert "jobs-cause-alert" not in viewer.get(page).content.decode()
    fail(jh.running(), "sandbox_failed")  # the third in the hour: sandbox_failed alerts from 3
    (alert,) = snapshot().alerts
    assert (alert.cause, alert.hour.failed_attempts, alert.alert_from) == ("sandbox_failed", 3, 3)
    html = viewer.get(page).content.decode()
    assert "sandbox_failed: 3 failed attempts in the last hour (the alert starts at 3)." in html
    assert "manage.py check --tag health" in html  # where the operator looks first
    assert "?error_code=sandbox_failed" in html
    clock.advance(3601)  # an hour on, the attempts are in the day's figures only: the alert clears
    assert snapshot().alerts == [] and "jobs-cause-alert" not in viewer.get(page).content.decode()


@pytest.mark.django_db
def test_an_operator_sets_a_causes_alert_threshold_or_turns_it_off(settings):
    fail(jh.running(), "internal_error")
    assert snapshot().alerts == []
    settings.JOBS_CAUSE_ALERTS = {"internal_error": 1, "corrupt_input": 1}
    fail(jh.running(), "corrupt_input")
    assert sorted(a.cause for a in snapshot().alerts) == ["corrupt_input", "internal_error"]
    settings.JOBS_CAUSE_ALERTS = {"internal_error": 0, "corrupt_input": 1}
    assert [a.cause for a in snapshot().alerts] == ["corrupt_input"]
