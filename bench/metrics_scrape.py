"""Benchmark 8: a ``/metrics`` scrape (the health snapshot) at 10k, 1M and 10M jobs (PostgreSQL).

The question: does a scrape cost the same whatever the number of jobs ever run? One database of
this run's own is grown step by step (10,000 -> 1,000,000 -> 10,000,000 jobs) and, at each size,
the scrape is timed with the code as it is (``jobs.metrics.render``) and, on the same data in the
same run, with the code before the histogram table (``jobs/health.py`` and ``jobs/metrics.py`` of
commit ``OLD_COMMIT``, loaded from git into this process), alternated.

What is held constant, as on a platform that has simply been running for longer: the live jobs
(uploaded, queued, running, cancel requested, stalled, over 60 tenants and 10 workers), the last
day's activity (``--day-jobs`` jobs finished in the last 24 h with their events and stage runs) and
30 days of hourly timing buckets. What grows: history, jobs that finished 2-365 days ago, each
with its final event and its stage run. History is inserted with ``generate_series`` while the
tables' secondary indexes are dropped, then the indexes are built again and the tables
``VACUUM ANALYZE``d (the same indexes, built faster than row by row; triggers are off for the fill).

Printed per size: scrape p50/p95 (ms) of ``--scrapes`` scrapes after one warm-up and the number of
queries, old and new; at the largest size the EXPLAIN (ANALYZE, BUFFERS) plan of every new query
and whether any scans a big table sequentially. Targets: the new scrape at the largest size within
1.5x of its time at the smallest (noise allowance on a shared machine) with the same number of
queries, and no sequential scan of jobs, events or stage runs.

    .venv/bin/python bench/metrics_scrape.py [--quick] [--sizes 10000,1000000,10000000]
        [--day-jobs N] [--scrapes N] [--no-plans] [--json FILE] [--keep]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

# The last commit whose health figures were computed from the raw rows (before the histograms).
OLD_COMMIT = "ecd445e"
FLAT_TARGET = 1.5
BIG_TABLES = ("jobs_job", "jobs_jobevent", "jobs_stagerun")

STAGES = ("parsing", "ocr", "chunking", "embedding", "indexing")

# Live jobs: i % 1000 decides the status; tenants 60 (more than TENANT_LIMIT), workers 10.
FILL_LIVE = """
INSERT INTO jobs_job (
    id, kind, tenant, subject_id, subject_version, payload, status, stage, version, attempt,
    attempts_total, skipped_stages, hints, checkpoint, cleanup_from, worker_token, worker_name,
    heartbeat_at, lease_expires_at, lost_worker, not_before, dispatched_at, progress, error_code,
    error_message, created_at, queued_at, started_at, stalled_at, cancel_requested_at, updated_at
)
SELECT md5('live' || i)::uuid, 'document.ingest', 'tenant-' || (i % 60), 'live-' || i, 1, '{}'::jsonb,
       st, (ARRAY['parsing','ocr','chunking','embedding','indexing'])[1 + i % 5], 3, 1, 1, '[]'::jsonb,
       '{}'::jsonb, '{}'::jsonb, '',
       CASE WHEN st IN ('running', 'cancel_requested') THEN md5('tok' || i) END,
       CASE WHEN st IN ('running', 'cancel_requested', 'stalled') THEN 'worker-' || (i % 10) ELSE '' END,
       CASE WHEN st IN ('running', 'cancel_requested') THEN now() - interval '3 seconds'
            WHEN st = 'stalled' THEN now() - interval '2 hours' END,
       CASE WHEN st IN ('running', 'cancel_requested') THEN now() + interval '30 seconds' END,
       CASE WHEN st = 'stalled' THEN 'worker-' || (i % 10) ELSE '' END,
       CASE WHEN st = 'queued' THEN now() - interval '1 second' * (i % 3600) END,
       CASE WHEN st = 'queued' THEN now() - interval '1 second' * (i % 3600) END,
       40, CASE WHEN st = 'stalled' THEN 'worker_lost' ELSE '' END, '',
       now() - interval '1 second' * (i % 3600), now() - interval '1 second' * (i % 3600),
       CASE WHEN st NOT IN ('uploaded', 'queued') THEN now() - interval '1 second' * (i % 60) END,
       CASE WHEN st = 'stalled' THEN now() - interval '1 hour' END,
       CASE WHEN st = 'cancel_requested' THEN now() - interval '2 seconds' END,
       now()
FROM generate_series(1, 1000) AS i
CROSS JOIN LATERAL (SELECT CASE WHEN i <= 50 THEN 'uploaded' WHEN i <= 550 THEN 'queued'
    WHEN i <= 950 THEN 'running' WHEN i <= 990 THEN 'cancel_requested' ELSE 'stalled' END AS st) AS s
"""

# Jobs that finished at ``fin`` (a prefix names them apart: the recent day and the history), each
# with its final transition (the recent ones also their enqueue and claim) and its last stage run,
# in one statement.
FILL_FINISHED = """
WITH j AS (
    INSERT INTO jobs_job (
        id, kind, tenant, subject_id, subject_version, payload, status, stage, version, attempt,
        attempts_total, skipped_stages, hints, checkpoint, cleanup_from, worker_token, worker_name,
        heartbeat_at, lease_expires_at, lost_worker, not_before, dispatched_at, progress, error_code,
        error_message, created_at, queued_at, started_at, finished_at, updated_at
    )
    SELECT md5(%(prefix)s || i)::uuid, 'document.ingest', 'tenant-' || (i %% 60), %(prefix)s || i, 1,
           '{}'::jsonb, st, CASE WHEN st = 'ready' THEN 'indexing' ELSE 'parsing' END, 12, 1, 5,
           '[]'::jsonb, '{}'::jsonb, '{}'::jsonb, '', NULL, 'worker-' || (i %% 10), fin, NULL, '',
           NULL, NULL, CASE WHEN st = 'ready' THEN 100 ELSE 10 END,
           CASE WHEN st = 'failed' THEN 'corrupt_input' ELSE '' END, '',
           fin - interval '2 minutes', fin - interval '2 minutes', fin - interval '100 seconds', fin, fin
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
    CROSS JOIN LATERAL (SELECT
        CASE WHEN i %% 100 < 85 THEN 'ready' WHEN i %% 100 < 95 THEN 'failed' ELSE 'cancelled' END AS st,
        now() - %(base)s::interval - %(spread)s::interval * ((i * 7919) %% 100003)::float / 100003 AS fin
    ) AS s
    RETURNING id, status, stage, progress, worker_name, error_code, queued_at, started_at, finished_at
), events AS (
    INSERT INTO jobs_jobevent (job_id, at, kind, name, actor, actor_name, from_status, to_status,
                               stage, attempt, job_version, progress, processed, total, reason)
    SELECT j.id, e.at, 'transition', e.name, 'worker', 'worker-1', e.from_status, e.to_status,
           j.stage, 1, e.v, j.progress, NULL, NULL, ''
    FROM j CROSS JOIN LATERAL (VALUES
        (j.finished_at,
         CASE j.status WHEN 'ready' THEN 'publish' WHEN 'failed' THEN 'fail' ELSE 'cancel' END,
         CASE j.status WHEN 'cancelled' THEN 'queued' ELSE 'running' END, j.status::text, 12),
        (j.queued_at, 'enqueue', 'uploaded', 'queued', 2),
        (j.started_at, 'claim', 'queued', 'running', 3)
    ) AS e(at, name, from_status, to_status, v)
    WHERE %(all_events)s OR e.name NOT IN ('enqueue', 'claim')
)
INSERT INTO jobs_stagerun (job_id, stage, attempt, worker_token, worker_name, started_at,
                           finished_at, outcome, error_code, error_type, error_detail, traceback, hints)
SELECT id, stage, 1, md5('r' || id::text), worker_name, started_at, finished_at, status,
       error_code, '', '', '', '{}'::jsonb
FROM j
"""

# 30 days of hourly buckets (what the hooks leave when nothing prunes them) and the all-time rows.
FILL_BUCKETS = """
INSERT INTO jobs_timingbucket (kind, stage, metric, hour, bucket, count, total)
SELECT 'document.ingest', stage, metric, date_trunc('hour', now()) - interval '1 hour' * h, b,
       1 + (h * 31 + b * 7) % 40, (1 + (h * 31 + b * 7) % 40) * 0.8 * b
FROM generate_series(0, 30 * 24 - 1) AS h,
     unnest(ARRAY['parsing','ocr','chunking','embedding','indexing']) AS stage,
     unnest(ARRAY['wait','duration']) AS metric,
     generate_series(3, 14) AS b
UNION ALL
SELECT 'document.ingest', stage, metric, '1970-01-01 00:00:00+00', b, 1000000, 800000.0 * b
FROM unnest(ARRAY['parsing','ocr','chunking','embedding','indexing']) AS stage,
     unnest(ARRAY['wait','duration']) AS metric, generate_series(3, 14) AS b
"""

SECONDARY_INDEXES = """
SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.tablename IN ('jobs_job', 'jobs_jobevent', 'jobs_stagerun')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.indexname))::regclass)
"""


def load_old_code() -> types.ModuleType | None:
    """``jobs/metrics.py`` of OLD_COMMIT, wired to that commit's ``jobs/health.py``; its own
    registry, so it scrapes exactly as the old ``/metrics`` did. None without the git history."""

    def source(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:{path}"],
            cwd=common.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    try:
        health_src, metrics_src = source("jobs/health.py"), source("jobs/metrics.py")
    except (subprocess.CalledProcessError, OSError) as exc:
        say(f"(old code not available from git: {exc}; only the new scrape is measured)")
        return None
    modules = {}
    for name, src in (
        ("bench_old_health", health_src),
        ("bench_old_metrics", metrics_src.replace("from jobs.health import", "from bench_old_health import")),
    ):
        spec = importlib.util.spec_from_loader(name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        exec(compile(src, f"{OLD_COMMIT}:{name}", "exec"), module.__dict__)
        modules[name] = module
    return modules["bench_old_metrics"]


def scrape_times(render: Any, runs: int) -> tuple[list[float], list[str]]:
    """Milliseconds of ``runs`` scrapes after a warm-up, and the SQL of the last one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    render()
    times, sql = [], []
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            render()
            times.append((time.perf_counter() - start) * 1000)
        sql = [q["sql"] for q in captured.captured_queries]
    return times, sql


def hook_cost(n: int = 500) -> dict[str, float]:
    """What the hooks add to a worker's transaction: ``n`` transactions with one stage-run UPDATE
    each, alone and with the histogram UPSERT after it (alternated in rounds), in milliseconds."""
    from django.db import transaction
    from django.utils import timezone

    from jobs.models import Job, StageRun
    from jobs.timings import DURATION, timing_record

    job = Job.objects.create(kind="bench.hook", tenant="bench", subject_id="hook", stage="parsing")
    run = StageRun.objects.create(job=job, stage="parsing", attempt=1, worker_token="t", worker_name="w")
    sides: dict[str, list[float]] = {"update": [], "update + upsert": []}
    for i in range(n):
        for side, times in sides.items():
            start = time.perf_counter()
            with transaction.atomic():
                StageRun.objects.filter(pk=run.pk).update(attempt=i)
                if side != "update":
                    timing_record(
                        kind="bench.hook", stage="parsing", metric=DURATION, seconds=i % 90, at=timezone.now()
                    )
            times.append((time.perf_counter() - start) * 1000)
    return {side: common.median(times) for side, times in sides.items()}


def fill(conn: Any, sql: str, **params: Any) -> None:
    conn.execute(sql, params)


def grow(conn: Any, first: int, last: int) -> float:
    """History jobs ``first``..``last`` (finished 2-365 days ago) with their event and stage run,
    inserted with the secondary indexes dropped, which are then built again."""
    start = time.perf_counter()
    indexes = conn.execute(SECONDARY_INDEXES).fetchall()
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    conn.execute("SET session_replication_role = replica")  # no FK checks or NOTIFY trigger per row
    step = 1_000_000
    for lo in range(first, last + 1, step):
        hi = min(last, lo + step - 1)
        fill(
            conn,
            FILL_FINISHED,
            prefix="h",
            first=lo,
            last=hi,
            base="2 days",
            spread="363 days",
            all_events=False,
        )
    conn.execute("SET session_replication_role = DEFAULT")
    for _, definition in indexes:
        conn.execute(definition)
    conn.execute("VACUUM ANALYZE jobs_job")
    conn.execute("VACUUM ANALYZE jobs_jobevent")
    conn.execute("VACUUM ANALYZE jobs_stagerun")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--sizes", help="Job counts (default 10000,1000000,10000000; --quick 10000,100000).")
    parser.add_argument("--day-jobs", type=int, default=10_000, help="Jobs finished in the last 24 h.")
    parser.add_argument("--scrapes", type=int, default=5, help="Timed scrapes per size and side.")
    parser.add_argument("--no-plans", action="store_true", help="Do not print the EXPLAIN plans.")
    args = parser.parse_args()
    sizes = [
        int(s)
        for s in (args.sizes or ("10000,100000" if args.quick else "10000,1000000,10000000")).split(",")
    ]

    common.header(f"metrics scrape at {', '.join(f'{n:,}' for n in sizes)} jobs, PostgreSQL")
    common.print_machine()
    report = common.Report("metrics_scrape")
    import psycopg

    rows: list[dict[str, Any]] = []
    with (
        common.bench_database("metrics", keep=args.keep) as (_, url),
        common.temp_dir("metrics", args.keep) as tmp,
    ):
        env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp)
        common.setup_django(env)
        common.migrate()
        from jobs.metrics import render

        old_render = getattr(load_old_code(), "render", None)
        hook = hook_cost()
        added = hook["update + upsert"] - hook["update"]
        say(
            f"hook cost: a transaction with a stage-run UPDATE {hook['update']:.2f} ms, with the "
            f"histogram UPSERT too {hook['update + upsert']:.2f} ms (+{added:.2f} ms; median of 500 each)"
        )
        report.figures["hook_ms"] = hook
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(FILL_LIVE)
            fill(
                conn,
                FILL_FINISHED,
                prefix="d",
                first=1,
                last=args.day_jobs,
                base="1 minute",
                spread="23 hours",
                all_events=True,
            )
            conn.execute(FILL_BUCKETS)
            conn.execute("VACUUM ANALYZE")
            have = conn.execute("SELECT count(*) FROM jobs_job").fetchone()[0]
            say(f"constant part: {have:,} jobs (1,000 live, {args.day_jobs:,} finished in the last 24 h)")
            history = 0
            for size in sizes:
                target = max(0, size - have)
                fill_s = grow(conn, history + 1, target) if target > history else 0.0
                history = max(history, target)
                total, events, runs = (
                    conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in BIG_TABLES
                )
                say(f"\n{total:,} jobs, {events:,} events, {runs:,} stage runs (grown in {fill_s:.0f} s)")
                row: dict[str, Any] = {"jobs": total, "events": events, "runs": runs, "fill_s": fill_s}
                sides = [("new", render, args.scrapes)]
                if old_render is not None:
                    sides.insert(0, ("old", old_render, max(1, min(args.scrapes, 3))))
                for side, fn, runs_n in sides:
                    times, sql = scrape_times(fn, runs_n)
                    row[side] = {
                        "p50_ms": common.median(times),
                        "p95_ms": common.percentile(times, 95),
                        "queries": len(sql),
                        "times_ms": times,
                    }
                    row[f"{side}_sql"] = sql
                    say(
                        f"  {side}: p50 {common.median(times):9.1f} ms  p95 "
                        f"{common.percentile(times, 95):9.1f} ms  {len(sql)} queries  ({runs_n} scrapes)"
                    )
                rows.append(row)
            # The plans of the new scrape's queries at the largest size.
            plans = []
            shapes = {re.sub(r"'[^']*'", "?", sql): sql for sql in rows[-1]["new_sql"]}
            for sql in shapes.values():  # once per shape (the tenant quota lookups repeat)
                start = time.perf_counter()
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql).fetchall())
                ms = (time.perf_counter() - start) * 1000
                seq = [t for t in BIG_TABLES if f"Seq Scan on {t} " in plan + " "]
                plans.append({"sql": sql, "plan": plan, "ms": ms, "seq_scans": seq})
            say("\nnew scrape's queries at the largest size (EXPLAIN ANALYZE wall ms, sequential scans):")
            for p in plans:
                first_line = " ".join(p["sql"].split())[:110]
                how = "SEQ " + ",".join(p["seq_scans"]) if p["seq_scans"] else "index"
                say(f"  {p['ms']:8.2f} ms  {how}  {first_line}")
            if not args.no_plans:
                for p in plans:
                    say(f"\n--- {p['ms']:.2f} ms\n{p['sql']}\n{p['plan']}")

    for row in rows:
        row.pop("new_sql", None)
        row.pop("old_sql", None)
    small, large = rows[0], rows[-1]
    report.figures.update({"sizes": rows, "plans": [{k: v for k, v in p.items()} for p in plans]})
    ratio = large["new"]["p50_ms"] / small["new"]["p50_ms"]
    report.check(
        f"new scrape p50 at {large['jobs']:,} jobs / at {small['jobs']:,} jobs",
        ratio,
        FLAT_TARGET,
        higher_is_better=False,
        unit="x",
    )
    report.check(
        "new scrape: queries at the largest size minus at the smallest",
        large["new"]["queries"] - small["new"]["queries"],
        0,
        higher_is_better=False,
    )
    report.check(
        "new scrape: queries scanning jobs, events or stage runs sequentially",
        sum(1 for p in plans if p["seq_scans"]),
        0,
        higher_is_better=False,
    )
    if "old" in large:
        report.notes.append(
            f"old scrape p50 {small['old']['p50_ms']:.0f} ms at {small['jobs']:,} jobs -> "
            f"{large['old']['p50_ms']:.0f} ms at {large['jobs']:,} "
            f"({large['old']['p50_ms'] / small['old']['p50_ms']:.1f}x); "
            f"new {small['new']['p50_ms']:.0f} -> {large['new']['p50_ms']:.0f} ms ({ratio:.2f}x)"
        )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
