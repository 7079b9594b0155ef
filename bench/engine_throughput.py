"""Benchmark 1: jobs/s through all five stages of the no-op pipeline on PostgreSQL.

Three measurements in one run, on this run's own database:

1. the engine: N ``test.noop`` jobs created with ``job_create`` (which dispatches a q2 task at
   commit) while a real ``manage.py qcluster`` (Q_WORKERS=2, ORM broker) runs them; wall time from
   the first enqueue to the last ``ready``;
2. baseline (a): a raw psycopg loop with 2 client threads doing, per job, the same write statements
   as the engine (counted over one in-process ``job_create`` + ``run_job`` with a statement trace),
   grouped into the same transactions, as version-checked UPDATEs and INSERTs on scratch tables;
3. baseline (b): django-q2 alone: 5 x N ``async_task`` of a no-op function through the same
   cluster (one q2 task per stage, what the engine avoids by continuing inline), dispatched with
   the engine's own options (no result row kept), and once more keeping q2's default result rows.

Targets: >= 100 jobs/s, >= 0.3 x the raw loop, faster than q2 alone.

    .venv/bin/python bench/engine_throughput.py [--quick] [--jobs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

KIND = "test.noop"
STAGES = 5


# --- the engine's statements per job -----------------------------------------------------------

_TABLE = re.compile(
    r'^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM)\s+"?([\w.]+)"?', re.IGNORECASE
)


_WITH_WRITE = re.compile(r"^\s*WITH\s+\w+\s+AS\s+\(\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


def classify(sql: str) -> tuple[str, str]:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head == "WITH" and (inner := _WITH_WRITE.match(sql)):
        # A write fed into another (the transition's UPDATE and its event's INSERT): counted
        # by its first write, one statement and one round trip.
        return classify(sql[inner.start(1) :])
    if head == "SELECT" and "pg_notify" in sql:
        return "NOTIFY", ""
    if head in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
        return "SAVEPOINT", ""
    if head in ("INSERT", "UPDATE", "DELETE"):
        match = _TABLE.match(sql)
        return head, match.group(1) if match else ""
    return head or "OTHER", ""


class StatementTrace:
    """Every statement of this thread's connection, grouped by transaction.

    A statement outside ``atomic`` is its own (autocommit) transaction; inside, statements are
    grouped until the outermost ``atomic`` commits (a rollback discards the group).
    """

    def __init__(self) -> None:
        from django.db import connection

        self.conn = connection
        self.txns: list[tuple[str, list[tuple[str, str]]]] = []
        self.current: list[tuple[str, str]] = []
        self.connects = 0

    def _wrapper(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        op = classify(sql)
        if self.conn.in_atomic_block:
            self.current.append(op)
        else:
            self.txns.append(("auto", [op]))
        return execute(sql, params, many, context)

    def __enter__(self) -> StatementTrace:
        self._orig_commit = self.conn.commit
        self._orig_rollback = self.conn.rollback

        def commit() -> None:
            self.txns.append(("txn", self.current))
            self.current = []
            self._orig_commit()

        def rollback() -> None:
            self.current = []
            self._orig_rollback()

        self._orig_connect = self.conn.connect

        def connect() -> None:
            self.connects += 1
            self._orig_connect()

        self.conn.commit = commit  # type: ignore[method-assign]
        self.conn.rollback = rollback  # type: ignore[method-assign]
        self.conn.connect = connect  # type: ignore[method-assign]
        self._wrap = self.conn.execute_wrapper(self._wrapper)
        self._wrap.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._wrap.__exit__(*exc)
        del self.conn.commit
        del self.conn.rollback
        del self.conn.connect

    def counts(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for _, ops in self.txns:
            for kind, _ in ops:
                out[kind] += 1
        out["transactions (commits)"] = sum(
            1 for mode, ops in self.txns if mode == "txn" or ops[0][0] in ("INSERT", "UPDATE", "DELETE")
        )
        out["statements"] = sum(len(ops) for _, ops in self.txns)
        out["new connections"] = self.connects
        out["round trips"] = out["statements"] + 2 * sum(1 for mode, _ in self.txns if mode == "txn")
        return out

    def write_plan(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Transactions reduced to their writes (read-only transactions dropped)."""
        plan = []
        for mode, ops in self.txns:
            writes = [op for op in ops if op[0] in ("INSERT", "UPDATE", "DELETE")]
            if writes:
                plan.append((mode if len(writes) == 1 and mode == "auto" else "txn", writes))
        return plan


def trace_engine(jobs: int = 3) -> tuple[Counter[str], list[tuple[str, list[tuple[str, str]]]], Counter[str]]:
    """Statements of ``job_create`` (with its dispatch) + an in-process ``run_job``, per job."""
    from django.db import connection
    from django_q.models import OrmQ

    from jobs.executor import run_job
    from jobs.models import Job
    from jobs.services.lifecycle import job_create

    traces = []
    tables: Counter[str] = Counter()
    for i in range(jobs):
        connection.close()  # every traced job starts without a connection: "new connections" >= 1
        with StatementTrace() as trace:
            job = job_create(kind=KIND, tenant="bench-trace", subject_id=f"trace-{i}")
            result = run_job(job.pk, worker="bench-trace")
        assert result == "done", result
        assert Job.objects.get(pk=job.pk).status == "ready"
        traces.append(trace)
    OrmQ.objects.all().delete()  # the traced jobs' q2 tasks: nobody must run them
    last = traces[-1]
    for _, ops in last.txns:
        for kind, table in ops:
            if kind in ("INSERT", "UPDATE", "DELETE"):
                tables[f"{kind} {table}"] += 1
    return last.counts(), last.write_plan(), tables


# --- baseline (a): the raw psycopg loop --------------------------------------------------------

RAW_SCHEMA = """
DROP TABLE IF EXISTS bench_raw_event; DROP TABLE IF EXISTS bench_raw_job;
CREATE TABLE bench_raw_job (
    id bigint PRIMARY KEY, status text NOT NULL, stage text NOT NULL DEFAULT 's0',
    version bigint NOT NULL DEFAULT 1, worker_token text, progress double precision NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE bench_raw_event (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, name text NOT NULL, to_status text NOT NULL,
    job_version bigint NOT NULL, at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bench_raw_event_job ON bench_raw_event (job_id, id);
"""


def raw_loop(url: str, plan: list[tuple[str, list[tuple[str, str]]]], jobs: int, threads: int = 2) -> float:
    """Seconds for ``jobs`` jobs, each replaying ``plan`` (the engine's writes, same grouping)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_SCHEMA)  # type: ignore[arg-type]

    def one_write(conn: Any, kind: str, table: str, job_id: int, state: dict[str, int]) -> None:
        if kind == "INSERT" and table == "jobs_job":
            conn.execute("INSERT INTO bench_raw_job (id, status) VALUES (%s, 'uploaded')", (job_id,))
        elif kind == "INSERT":
            conn.execute(
                "INSERT INTO bench_raw_event (job_id, name, to_status, job_version) VALUES (%s, %s, %s, %s)",
                (job_id, table, "running", state["version"]),
            )
        elif kind == "UPDATE":
            cur = conn.execute(
                "UPDATE bench_raw_job SET version = version + 1, status = %s, updated_at = now() "
                "WHERE id = %s AND version = %s",
                ("running", job_id, state["version"]),
            )
            if cur.rowcount != 1:
                raise RuntimeError("compare-and-set lost in the raw loop")
            state["version"] += 1
        else:  # DELETE
            conn.execute(
                "DELETE FROM bench_raw_event "
                "WHERE id = (SELECT max(id) FROM bench_raw_event WHERE job_id = %s)",
                (job_id,),
            )

    def worker(ids: list[int]) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for job_id in ids:
                state = {"version": 1}
                for mode, ops in plan:
                    if mode == "auto":
                        one_write(conn, ops[0][0], ops[0][1], job_id, state)
                    else:
                        with conn.transaction():
                            for kind, table in ops:
                                one_write(conn, kind, table, job_id, state)

    chunks = [list(range(i, jobs, threads)) for i in range(threads)]
    pool = [threading.Thread(target=worker, args=(chunk,)) for chunk in chunks]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start


# --- the cluster runs ------------------------------------------------------------------------


def ormq_count() -> int:
    from django_q.models import OrmQ

    return OrmQ.objects.count()


def warm_up_cluster() -> None:
    from django_q.tasks import async_task

    for i in range(4):
        async_task("bench.tasks.noop", i)
    common.wait_for(lambda: ormq_count() == 0, timeout=90, interval=0.2, what="the cluster to start")


def run_engine(jobs: int, tag: str, cap: float) -> dict[str, Any]:
    """Create ``jobs`` jobs while the cluster runs them; wall time from the first enqueue to the
    last ready. When that takes longer than ``cap`` seconds, the rate is the jobs ready by then
    over the time elapsed (a steady-state rate), and what is left is taken out of the broker."""
    from django.db.models import Max, Min
    from django_q.models import OrmQ

    from jobs.models import Job
    from jobs.services.lifecycle import job_create

    tenant = f"bench-{tag}"
    start = time.time()
    for i in range(jobs):
        job_create(kind=KIND, tenant=tenant, subject_id=f"{tag}-{i}")
    enqueued = time.time()

    def finished() -> bool:
        counts = Counter(Job.objects.filter(tenant=tenant).values_list("status", flat=True))
        if counts.get("failed"):
            raise RuntimeError(f"jobs failed: {dict(counts)}")
        return counts.get("ready", 0) >= jobs or time.time() - start > cap

    common.wait_for(finished, timeout=cap + 60, interval=0.25, what="all jobs ready")
    ready = Job.objects.filter(tenant=tenant, status="ready")
    done = ready.count()
    capped = done < jobs
    if capped:
        end = time.time()
        OrmQ.objects.all().delete()  # the rest must not run into the next measurement
        common.wait_for(
            lambda: not Job.objects.filter(tenant=tenant, status="running").exists(),
            timeout=60,
            interval=0.25,
        )
    agg = ready.aggregate(
        first_queued=Min("queued_at"), first_started=Min("started_at"), last_ready=Max("finished_at")
    )
    last = end if capped else agg["last_ready"].timestamp()
    first = Job.objects.filter(tenant=tenant).aggregate(q=Min("queued_at"))["q"].timestamp()
    wall = last - first
    processing = last - agg["first_started"].timestamp()
    latencies = [(f - q).total_seconds() for q, f in ready.values_list("created_at", "finished_at")]
    return {
        "jobs": jobs,
        "ready": done,
        "capped": capped,
        "wall_s": wall,
        "jobs_per_s": done / wall,
        "enqueue_s": enqueued - start,
        "enqueue_per_s": jobs / (enqueued - start),
        "processing_s": processing,
        "processing_jobs_per_s": done / processing,
        "latency_p50_s": common.percentile(latencies, 50),
        "latency_p95_s": common.percentile(latencies, 95),
    }


def run_q2_alone(jobs: int, tag: str, cap: float, *, keep_results: bool = False) -> dict[str, Any]:
    """5 x ``jobs`` no-op tasks; capped like :func:`run_engine` (done = enqueued - left in OrmQ).

    As the engine dispatches (no result rows kept), or with ``keep_results`` as q2 does by
    default (a result row per task, the table pruned to ``save_limit``)."""
    from django_q.models import OrmQ
    from django_q.tasks import async_task

    from jobs.broker import enqueue_broker
    from jobs.dispatch import TASK_OPTIONS

    options = {k: v for k, v in TASK_OPTIONS.items() if not (keep_results and k == "save")}
    options["broker"] = enqueue_broker()  # the engine's dispatch enqueues through it too
    tasks = jobs * STAGES
    start = time.time()
    for i in range(tasks):
        # The same call as jobs.dispatch.dispatch makes, with a no-op function.
        async_task("bench.tasks.noop", str(i), task_name=f"noop-{tag}-{i}", q_options=dict(options))
    enqueued = time.time()
    # A task's broker row goes at its acknowledgement, after it ran (no result rows are kept).
    common.wait_for(
        lambda: ormq_count() == 0 or time.time() - start > cap,
        timeout=cap + 60,
        interval=0.05,
        what="q2 queue",
    )
    end = time.time()
    left = ormq_count()
    if left:
        OrmQ.objects.all().delete()
        time.sleep(2)  # tasks already taken by the workers finish
    done = tasks - left
    wall = end - start
    return {
        "tasks": tasks,
        "done": done,
        "capped": bool(left),
        "wall_s": wall,
        "tasks_per_s": done / wall,
        "jobs_equivalent_per_s": done / STAGES / wall,
        "enqueue_s": enqueued - start,
        "enqueue_per_s": tasks / (enqueued - start),
    }


def cluster_phase(
    children: common.Children,
    env: dict[str, str],
    jobs: int,
    tag: str,
    workers: int,
    cap: float,
    rounds: int = 1,
) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """``rounds`` alternated pairs (engine, lean q2) on one cluster; the per-round ratios too."""
    cluster = children.manage(f"qcluster-{tag}", ["qcluster"], env)
    try:
        warm_up_cluster()
        ratios: list[float] = []
        engines: list[dict[str, Any]] = []
        q2s: list[dict[str, Any]] = []
        for r in range(1, rounds):
            engines.append(run_engine(jobs, f"{tag}-r{r}", cap))
            q2s.append(run_q2_alone(jobs, f"{tag}-r{r}", cap))
            ratios.append(engines[-1]["jobs_per_s"] / q2s[-1]["jobs_equivalent_per_s"])
            say(
                f"round {r}: engine {engines[-1]['jobs_per_s']:.1f} jobs/s, lean q2 "
                f"{q2s[-1]['jobs_equivalent_per_s']:.1f} jobs/s: {ratios[-1]:.2f}x"
            )
        say(f"engine [{tag}]: creating {jobs} jobs while the cluster (Q_WORKERS={workers}) runs them ...")
        engine = run_engine(jobs, tag, cap)
        say(
            f"  {engine['jobs_per_s']:.1f} jobs/s ({engine['wall_s']:.2f} s first enqueue -> last ready; "
            f"enqueue alone {engine['enqueue_per_s']:.0f} jobs/s; processing window "
            f"{engine['processing_jobs_per_s']:.1f} jobs/s; job latency p50 {engine['latency_p50_s']:.2f} s, "
            f"p95 {engine['latency_p95_s']:.2f} s)"
            + (f" [capped at {cap:g} s: {engine['ready']} ready]" if engine["capped"] else "")
        )
        say(f"q2 alone [{tag}]: {jobs * STAGES} no-op async_task through the same cluster ...")
        q2 = run_q2_alone(jobs, tag, cap)
        say(
            f"  {q2['tasks_per_s']:.1f} tasks/s = {q2['jobs_equivalent_per_s']:.1f} jobs/s at one task per "
            f"stage ({q2['wall_s']:.2f} s; enqueue alone {q2['enqueue_per_s']:.0f} tasks/s)"
            + (f" [capped at {cap:g} s: {q2['done']} done]" if q2["capped"] else "")
        )
        ratios.append(engine["jobs_per_s"] / q2["jobs_equivalent_per_s"])
        say(f"round {rounds}: {ratios[-1]:.2f}x")
        engine["rounds_jobs_per_s"] = [e["jobs_per_s"] for e in engines] + [engine["jobs_per_s"]]
        q2["rounds_jobs_equivalent_per_s"] = [q["jobs_equivalent_per_s"] for q in q2s] + [
            q2["jobs_equivalent_per_s"]
        ]
        say(f"q2 alone [{tag}], keeping a result row per task (q2's default) ...")
        q2_saving = run_q2_alone(jobs, f"{tag}-saving", cap, keep_results=True)
        q2["with_result_rows"] = q2_saving
        say(
            f"  {q2_saving['tasks_per_s']:.1f} tasks/s = {q2_saving['jobs_equivalent_per_s']:.1f} jobs/s"
            + (f" [capped at {cap:g} s: {q2_saving['done']} done]" if q2_saving["capped"] else "")
        )
    finally:
        children.stop(cluster)
    return engine, q2, ratios


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--jobs", type=int, default=None, help="Jobs (default 500, --quick 100).")
    parser.add_argument("--workers", type=int, default=2, help="Q_WORKERS of the cluster (default 2).")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="Alternated engine / lean q2 rounds; verdict: median ratio (default 3, --quick 2).",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="Cap per measurement (default 75, --quick 40): past it the rate is what finished so far.",
    )
    args = parser.parse_args()
    jobs = args.jobs or (100 if args.quick else 500)
    rounds = args.rounds or (2 if args.quick else 3)
    args.max_seconds = args.max_seconds or (40.0 if args.quick else 75.0)

    common.header(f"engine throughput: {jobs} no-op jobs x {STAGES} stages, PostgreSQL")
    common.print_machine()
    report = common.Report("engine_throughput")
    with (
        common.bench_database("engine", keep=args.keep) as (_, url),
        common.temp_dir("engine", args.keep) as tmp,
    ):
        # Persistent connections for the cluster, as run_platform gives its workers; this
        # process creates the jobs as the web tier would with its pool (one kept connection).
        env = common.base_env(
            settings="tests.settings",
            database_url=url,
            var_dir=tmp,
            Q_WORKERS=str(args.workers),
            DB_CONN_MAX_AGE="60",
        )
        common.setup_django(env)
        common.migrate()

        counts, plan, tables = trace_engine()
        writes = sum(counts[k] for k in ("INSERT", "UPDATE", "DELETE"))
        say("\nstatements per job (job_create with its dispatch + run_job in-process, 5 stages):")
        for key in (
            "statements",
            "SELECT",
            "INSERT",
            "UPDATE",
            "DELETE",
            "NOTIFY",
            "SAVEPOINT",
            "transactions (commits)",
            "round trips",
            "new connections",
        ):
            say(f"  {key:<24} {counts.get(key, 0)}")
        say("  writes by table: " + ", ".join(f"{k} x{v}" for k, v in sorted(tables.items())))
        raw_trips = sum(len(ops) + (2 if mode == "txn" else 0) for mode, ops in plan)
        say(
            f"  write transactions replayed by the raw loop: {len(plan)} "
            f"({writes} writes, {raw_trips} round trips)"
        )
        say("  (round trips = statements + BEGIN/COMMIT of each multi-statement transaction)")
        report.figures["statements_per_job"] = dict(counts)
        report.figures["writes_per_job"] = writes
        report.figures["writes_by_table"] = dict(tables)

        children = common.Children(tmp)
        try:
            say("")
            engine, q2, ratios = cluster_phase(
                children, env, jobs, "shipped", args.workers, args.max_seconds, rounds
            )
        finally:
            children.stop_all()

        say(
            f"\nraw loop: {jobs} jobs x {writes} version-checked writes in {len(plan)} transactions, "
            "2 threads ..."
        )
        raw_s = raw_loop(url, plan, jobs, threads=2)
        raw = {"wall_s": raw_s, "jobs_per_s": jobs / raw_s, "writes_per_s": jobs * writes / raw_s}
        say(f"  {raw['jobs_per_s']:.1f} jobs/s ({raw['writes_per_s']:.0f} writes/s, {raw_s:.2f} s)")

    report.figures.update({"engine": engine, "q2_alone": q2, "raw_loop": raw})
    report.check("engine jobs/s", engine["jobs_per_s"], 100, higher_is_better=True, unit=" jobs/s")
    report.check(
        "engine / raw loop", engine["jobs_per_s"] / raw["jobs_per_s"], 0.3, higher_is_better=True, unit="x"
    )
    report.figures["engine_over_lean_q2_rounds"] = ratios
    report.check(
        "engine / q2 alone (one task per stage, dispatched as the engine does: no result rows; "
        f"median of {len(ratios)} alternated rounds' ratios {', '.join(f'{r:.2f}' for r in ratios)})",
        statistics.median(ratios),
        1.0,
        higher_is_better=True,
        unit="x",
    )
    report.notes.append(
        "engine / q2 alone keeping a result row per task (q2's default): "
        f"{engine['jobs_per_s'] / q2['with_result_rows']['jobs_equivalent_per_s']:.2f}x"
    )
    report.notes.append(
        f"uptime load average at the end: {', '.join(f'{x:.2f}' for x in common.machine_info()['loadavg'])}"
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
