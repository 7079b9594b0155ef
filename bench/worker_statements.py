"""What one small document's ingest costs the worker and its database server, apart from the
rest of the machine: the statements, the worker's CPU and the CPU of the server process that
answers it (PostgreSQL on this machine: ``/proc`` of ``pg_backend_pid()``).

The bulk load (``bulk_small.py``) counts every process of the database server, so on a shared
machine it also counts other people's databases; this one reads only the backend of its own
connection. Small text documents (about 5 KB, three chunks) go through ``document_upload`` and
``run_job`` in this process, as the tests run them; only ``run_job`` is measured. The hashing
embedder (the test settings') keeps the model's time out of the figures, so what is left is the
engine's and the stages' own work. Run it in two trees, alternated, to compare them.

    .venv/bin/python bench/worker_statements.py [--docs N] [--rounds N] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TICKS = os.sysconf("SC_CLK_TCK")


def backend_cpu_s(pid: int) -> float:
    """The user and system CPU seconds of server process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def text(n: int, tag: str) -> bytes:
    """Note ``n`` of round ``tag``: no two alike, so none is a copy of another (no dedup)."""
    return "\n\n".join(
        f"Section {s} of note {n} ({tag}). " + common.page_text(n * 10 + s, 260) for s in range(1, 4)
    ).encode()


def one_round(docs: int, tag: str) -> dict[str, float]:
    from django.db import connection

    from documents.models import Tenant
    from documents.services.upload import document_upload
    from jobs.executor import run_job

    tenant, _ = Tenant.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    jobs = [
        document_upload(tenant=tenant, data=text(i, tag), filename=f"{tag}-{i}.txt", title="").job
        for i in range(docs)
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    count = 0

    def counted(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal count
        count += 1
        return execute(sql, params, many, context)

    server0, worker0, wall0 = backend_cpu_s(backend), time.process_time(), time.perf_counter()
    with connection.execute_wrapper(counted):
        for job in jobs:
            assert job is not None
            while run_job(job.pk) != "not claimed":
                pass
    server, worker = backend_cpu_s(backend) - server0, time.process_time() - worker0
    return {
        "statements": count / docs,
        "worker_ms": worker / docs * 1000,
        "server_ms": server / docs * 1000,
        "wall_ms": (time.perf_counter() - wall0) / docs * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--docs", type=int, default=None, help="Documents a round (40, --quick 10).")
    parser.add_argument("--rounds", type=int, default=None, help="Rounds (3, --quick 2).")
    args = parser.parse_args()
    docs = args.docs or (10 if args.quick else 40)
    rounds = args.rounds or (2 if args.quick else 3)
    common.header(
        f"worker statements: {docs} small documents in-process a round, {rounds} rounds, PostgreSQL"
    )
    common.print_machine()
    report = common.Report("worker_statements")
    with (
        common.bench_database("wstmt", keep=args.keep) as (_, url),
        common.temp_dir("wstmt", args.keep) as tmp,
    ):
        env = common.base_env(settings="tests.settings", database_url=url, var_dir=tmp, DB_CONN_MAX_AGE="60")
        common.setup_django(env)
        common.migrate()
        one_round(5, "warm")
        results = []
        for r in range(rounds):
            results.append(one_round(docs, f"r{r}"))
            figures = ", ".join(f"{key} {value:.1f}" for key, value in results[-1].items())
            say(f"round {r + 1} (load {os.getloadavg()[0]:.1f}): a document: {figures}")
    medians = {key: statistics.median(r[key] for r in results) for key in results[0]}
    report.figures.update({"rounds": results, "median": medians})
    report.notes.append(
        "a document, median of rounds: " + ", ".join(f"{key} {value:.1f}" for key, value in medians.items())
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
