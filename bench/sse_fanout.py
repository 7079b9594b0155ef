"""Benchmark 4: SSE fan-out: 10 then 1,000 concurrent subscribers on ONE web server process.

One ``manage.py serve_web`` process (granian; DB_POOL=1, PostgreSQL, this run's own database) serves
``/api/documents/{id}/jobs/{job_id}/events``. A client process (this script with ``--client``:
asyncio + raw HTTP/1.1 streams, token auth) opens N streams spread over a few jobs and waits for
each stream's opening status event. The bench process then drives real transitions of those
jobs through the services (``job_claim``, ``job_report_progress``, ``job_complete_stage``) and
records each event's commit time (a hook on the connection's commit); the client records when
each event id arrives on each stream. Latency = receipt - commit, over all subscribers and
events. PostgreSQL connections of the server (pg_stat_activity on the bench database, minus the
bench process's own) are sampled while the streams are open and while events flow.

Targets: delivery latency p95 <= 0.5 s; server connections do not grow from 10 to 1,000 clients.

    .venv/bin/python bench/sse_fanout.py [--quick] [--subscribers 10,1000] [--jobs 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TEXT = b"Fan-out benchmark notes.\n\nThe harbor was quiet and the amber falcon crossed the ridge.\n"


# --- the client process ------------------------------------------------------------------------


async def _stream(
    idx: int,
    host: str,
    port: int,
    path: str,
    token: str,
    received: list[tuple[int, int, float]],
    opened: dict[int, float],
    errors: list[str],
    gate: asyncio.Semaphore,
    stop: asyncio.Event,
) -> None:
    try:
        async with gate:
            reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
            writer.write(
                (
                    f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Token {token}\r\n"
                    "Accept: text/event-stream\r\n\r\n"
                ).encode()
            )
            await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            errors.append(status.decode(errors="replace").strip() or "closed")
            writer.close()
            return
        chunked = False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
                chunked = True
        buffer = b""
        while not stop.is_set():
            if chunked:
                size_line = await reader.readline()
                if not size_line:
                    break
                size = int(size_line.strip() or b"0", 16)
                if size == 0:
                    break
                data = await reader.readexactly(size + 2)
                buffer += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    break
                buffer += data
            now = time.time()
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    if line.startswith(b"id:"):
                        event_id = int(line[3:].strip())
                        if idx not in opened:
                            opened[idx] = now
                        received.append((idx, event_id, now))
        writer.close()
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        errors.append(type(exc).__name__)


async def client_main(args: argparse.Namespace) -> None:
    from urllib.parse import urlsplit

    common.raise_nofile(args.subscribers + 256)
    parts = urlsplit(args.base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    paths = args.paths.split(",")
    received: list[tuple[int, int, float]] = []
    opened: dict[int, float] = {}
    errors: list[str] = []
    gate = asyncio.Semaphore(100)  # connections being opened at once
    stop = asyncio.Event()
    start = time.time()
    tasks = [
        asyncio.create_task(
            _stream(i, host, port, paths[i % len(paths)], args.token, received, opened, errors, gate, stop)
        )
        for i in range(args.subscribers)
    ]
    deadline = time.monotonic() + args.ready_timeout
    while time.monotonic() < deadline and len(opened) + len(errors) < args.subscribers:
        await asyncio.sleep(0.1)
    print(f"READY {len(opened)} {len(errors)} {time.time() - start:.2f}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.readline)  # the driver says when to stop
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    streams = [[i, paths[i % len(paths)]] for i in range(args.subscribers)]
    Path(args.out).write_text(
        json.dumps({"received": received, "opened": opened, "errors": errors, "streams": streams})
    )
    print("DONE", flush=True)


# --- the driver ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prepare(jobs: int) -> tuple[str, list[tuple[str, str]]]:
    """A token, and ``jobs`` queued document jobs: (job id, events path)."""
    from documents.models import Tenant
    from documents.services.accounts import user_create_in_tenant
    from documents.services.upload import document_upload

    # The same user, tenant and token when called again; new documents (and jobs) every time.
    token = user_create_in_tenant(username="bench", tenant_slug="bench")
    Tenant.objects.filter(slug="bench").update(max_running_jobs=1000, max_queued_jobs=1000)
    tenant = Tenant.objects.get(slug="bench")
    out = []
    for i in range(jobs):
        result = document_upload(
            tenant=tenant, data=TEXT + os.urandom(8).hex().encode(), filename=f"n{i}.txt"
        )
        assert result.job is not None
        out.append((str(result.job.pk), f"/api/documents/{result.document.pk}/jobs/{result.job.pk}/events"))
    return token, out


class CommitClock:
    """Records the wall time right after each commit of this thread's connection: an atomic
    block's commit, or a statement run in autocommit mode (the engine moves a job with one
    statement where it can, which commits as it returns)."""

    def __init__(self) -> None:
        from django.db import connection

        self.conn = connection
        self.last = 0.0
        orig = connection.commit

        def commit() -> None:
            orig()
            self.last = time.time()

        def autocommitted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            result = execute(sql, params, many, context)
            if not connection.in_atomic_block:
                self.last = time.time()
            return result

        connection.commit = commit  # type: ignore[method-assign]
        connection.execute_wrappers.append(autocommitted)


class ConnectionSampler(threading.Thread):
    """Counts the server's connections to the bench database (all but the bench process's)."""

    def __init__(self, url: str, exclude_pids: set[int]) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.exclude = exclude_pids | {self.conn.info.backend_pid}
        self.samples: list[int] = []
        self.halt = threading.Event()

    def count(self) -> int:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchall()
        return sum(1 for (pid,) in rows if pid not in self.exclude)

    def run(self) -> None:
        while not self.halt.wait(0.2):
            self.samples.append(self.count())

    def stop(self) -> list[int]:
        self.halt.set()
        self.join(timeout=5)
        self.conn.close()
        return self.samples


def drive(jobs: list[tuple[str, str]], clock: CommitClock, cycles: int, pause: float) -> dict[int, float]:
    """Claim, report progress and complete a stage of every job, ``cycles`` times; returns the
    commit time of every event this produced, by event id."""
    from jobs.models import JobEvent
    from jobs.services.worker import job_claim, job_complete_stage, job_report_progress

    commits: dict[int, float] = {}
    last_seen = {
        job_id: JobEvent.objects.filter(job_id=job_id).order_by("-id").values_list("id", flat=True).first()
        or 0
        for job_id, _ in jobs
    }

    def record(job_id: str) -> None:
        new = list(
            JobEvent.objects.filter(job_id=job_id, id__gt=last_seen[job_id]).values_list("id", flat=True)
        )
        for event_id in new:
            commits[event_id] = clock.last
        if new:
            last_seen[job_id] = max(new)

    claims: dict[str, Any] = {}
    for _ in range(cycles):
        for job_id, _ in jobs:
            claims[job_id] = job_claim(job_id=job_id, worker="bench-driver")
            assert claims[job_id] is not None
            record(job_id)
        time.sleep(pause)
        for job_id, _ in jobs:
            job_report_progress(job_id=job_id, token=claims[job_id].token, done=1, total=2)
            record(job_id)
        time.sleep(pause)
        for job_id, _ in jobs:
            job_complete_stage(claim=claims[job_id], continue_inline=False)
            record(job_id)
        time.sleep(pause)
    return commits


def one_phase(
    n: int,
    base: str,
    token: str,
    jobs: list[tuple[str, str]],
    url: str,
    tmp: Path,
    cycles: int,
    pause: float,
    ready_timeout: float,
) -> dict[str, Any]:
    from django.db import connection

    clock = CommitClock()
    out = tmp / f"client-{n}.json"
    client = subprocess.Popen(
        [
            common.PYTHON,
            __file__,
            "--client",
            "--base",
            base,
            "--token",
            token,
            "--paths",
            ",".join(p for _, p in jobs),
            "--subscribers",
            str(n),
            "--out",
            str(out),
            "--ready-timeout",
            str(ready_timeout),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=common.ROOT,
        start_new_session=True,
    )
    try:
        assert client.stdout is not None and client.stdin is not None
        ready = client.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"client did not get ready: {ready}")
        opened, failed, open_s = int(ready[1]), int(ready[2]), float(ready[3])
        say(f"  [{n}] {opened} streams open with their first event, {failed} failed, in {open_s:.1f} s")
        connection.ensure_connection()
        sampler = ConnectionSampler(url, {connection.connection.info.backend_pid})
        idle_conns = sampler.count()
        sampler.start()
        try:
            commits = drive(jobs, clock, cycles, pause)
            time.sleep(3.0 if n < 100 else 12.0)  # let the last deliveries arrive
        finally:
            busy = sampler.stop()
        client.stdin.write("STOP\n")
        client.stdin.flush()
        client.stdout.readline()
        client.wait(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        del connection.commit
    data = json.loads(out.read_text())
    by_job = {path: job_id for job_id, path in jobs}
    stream_job = {idx: by_job[path] for idx, path in data["streams"]}
    from jobs.models import JobEvent

    event_job = dict(
        (eid, str(jid))
        for eid, jid in JobEvent.objects.filter(pk__in=list(commits)).values_list("id", "job_id")
    )
    latencies = []
    delivered = 0
    for idx, event_id, at in data["received"]:
        if event_id in commits and event_job.get(event_id) == stream_job[idx]:
            latencies.append(at - commits[event_id])
            delivered += 1
    open_streams = set(int(k) for k in data["opened"])
    expected = sum(1 for idx in open_streams for eid in commits if event_job[eid] == stream_job[idx])
    # Over ALL subscribers: a delivery that never came counts as infinitely late.
    every = latencies + [float("inf")] * max(0, n * len(commits) // len(jobs) - delivered)
    res = {
        "subscribers": n,
        "p95_all_s": common.percentile(every, 95),
        "streams_open": opened,
        "streams_failed": failed,
        "open_seconds": open_s,
        "errors": sorted(set(data["errors"]))[:5],
        "events": len(commits),
        "deliveries_expected": expected,
        "deliveries": delivered,
        "p50_s": common.percentile(latencies, 50),
        "p95_s": common.percentile(latencies, 95),
        "p99_s": common.percentile(latencies, 99),
        "max_s": max(latencies) if latencies else float("nan"),
        "server_connections_idle": idle_conns,
        "server_connections_max_busy": max(busy) if busy else idle_conns,
    }
    say(
        f"  [{n}] {len(commits)} events -> {delivered}/{expected} deliveries; "
        f"latency p50 {res['p50_s'] * 1000:.0f} ms, p95 {res['p95_s'] * 1000:.0f} ms, "
        f"p99 {res['p99_s'] * 1000:.0f} ms, max {res['max_s'] * 1000:.0f} ms; server DB connections "
        f"{idle_conns} with streams idle, max {res['server_connections_max_busy']} while events flow"
    )
    if res["errors"]:
        say(f"  [{n}] stream errors: {res['errors']}")
    return res


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument(
        "--subscribers", default=None, help="Comma-separated counts (10,1000; --quick 10,200)."
    )
    parser.add_argument("--jobs", type=int, default=5, help="Jobs the subscribers are spread over.")
    parser.add_argument(
        "--cycles", type=int, default=None, help="claim/progress/complete cycles per job (4; --quick 2)."
    )
    parser.add_argument("--pause", type=float, default=1.0, help="Seconds between trigger steps.")
    parser.add_argument("--ready-timeout", type=float, default=90.0)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--paths", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        args.subscribers = int(args.subscribers)
        asyncio.run(client_main(args))
        return 0
    counts = [int(x) for x in (args.subscribers or ("10,200" if args.quick else "10,1000")).split(",")]
    cycles = args.cycles or (2 if args.quick else 4)

    common.header(
        f"SSE fan-out: {' then '.join(map(str, counts))} subscribers on one web server process, PostgreSQL"
    )
    common.print_machine()
    common.raise_nofile(max(counts) * 2 + 512)  # inherited by uvicorn and the client
    report = common.Report("sse_fanout")
    apps = [("shipped", "manage.py serve_web")]
    runs: dict[str, list[dict[str, Any]]] = {}
    pool_timeouts: dict[str, int] = {}
    with common.bench_database("sse", keep=args.keep) as (_, url), common.temp_dir("sse", args.keep) as tmp:
        # The driver emits a progress event on every report (the server is unchanged).
        env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp)
        common.setup_django({**env, "JOBS_PROGRESS_EVENT_SECONDS": "0"})
        common.migrate()
        children = common.Children(tmp)
        for label, app in apps:
            token, jobs = prepare(args.jobs)
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            say(f"\n--- server: {label} ({app}), one web server process, DB_POOL=1 (pool max 8)")
            server = children.start(
                f"uvicorn-{label.split()[0]}",
                # As deployed (manage.py serve_web serves config.asgi:application), one worker.
                [
                    common.PYTHON,
                    str(common.ROOT / "manage.py"),
                    "serve_web",
                    "--port",
                    str(port),
                    "--workers",
                    "1",
                ],
                # The stream caps are settings: raised so that 1,000 subscribers are measured.
                {**env, "DB_POOL": "1", "SSE_MAX_STREAMS_PER_USER": "100000", "SSE_MAX_STREAMS": "100000"},
            )
            try:
                import httpx

                def up(base: str = base) -> bool:
                    try:
                        return httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200
                    except httpx.HTTPError:
                        return False

                common.wait_for(up, timeout=60, interval=0.2, what="uvicorn")
                phases = []
                for n in counts:
                    if phases:  # fresh queued jobs for every phase (the previous ones moved on)
                        token, jobs = prepare(args.jobs)
                    say(f"{n} subscribers over {len(jobs)} jobs, {cycles} claim/progress/complete cycles:")
                    phases.append(
                        one_phase(n, base, token, jobs, url, tmp, cycles, args.pause, args.ready_timeout)
                    )
                runs[label] = phases
            finally:
                children.stop(server)
                log = children.log_text(f"uvicorn-{label.split()[0]}")
                timeouts = log.count("couldn't get a connection")
                if timeouts:
                    say(
                        f"  server log: {timeouts} x PoolTimeout "
                        '("couldn\'t get a connection after 30.00 sec")'
                    )
                pool_timeouts[label] = timeouts
            # The next server starts from fresh users and jobs.
            from django.contrib.auth import get_user_model

            get_user_model().objects.filter(username="bench").delete()
            from documents.models import Document, Tenant

            # Documents first: a collection is protected while documents are in it.
            Document.objects.filter(tenant__slug="bench").delete()
            Tenant.objects.filter(slug="bench").delete()

    report.figures["runs"] = runs
    report.figures["pool_timeouts_in_server_log"] = pool_timeouts
    phases = runs["shipped"]
    big, small = phases[-1], phases[0]
    report.check(
        f"delivery p95 over all {big['subscribers']} subscribers (undelivered = never)",
        big["p95_all_s"],
        0.5,
        higher_is_better=False,
        unit=" s",
    )
    report.check(
        f"streams opened at {big['subscribers']} subscribers (fraction)",
        big["streams_open"] / big["subscribers"],
        1.0,
        higher_is_better=True,
    )
    # "Not growing with clients": bounded by the server's pool (DB_POOL_MAX, 8) plus the one LISTEN
    # connection, with one of slack for a pooled connection being replaced, whatever the clients.
    bound = int(os.environ.get("DB_POOL_MAX", "8")) + 2
    report.check(
        f"server DB connections at {big['subscribers']} subscribers (at {small['subscribers']}: "
        f"{small['server_connections_max_busy']}; bound = pool max + LISTEN + 1)",
        big["server_connections_max_busy"],
        bound,
        higher_is_better=False,
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
