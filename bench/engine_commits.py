"""What the relaxed commits save per job: no-op five-stage jobs in-process on PostgreSQL, with
``JOBS_RELAXED_COMMIT`` on and off in alternated rounds (same process, same connection).

The cluster benchmark (engine_throughput.py) is the verdict; on this shared machine its rounds
move with the other work, while this one isolates the commit policy: each round runs ``--jobs``
jobs (``job_create`` + ``run_job`` in this process) once per setting, and the figure is the
median of the rounds' own ratios.

    .venv/bin/python bench/engine_commits.py [--quick] [--jobs N] [--rounds N] [--json FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

KIND = "test.noop"


def per_job_ms(jobs: int, tag: str) -> float:
    from jobs.executor import run_job
    from jobs.services.lifecycle import job_create

    start = time.perf_counter()
    for i in range(jobs):
        job = job_create(kind=KIND, tenant=f"commits-{tag}", subject_id=f"{tag}-{i}")
        assert run_job(job.pk, worker="bench") == "done"
    return (time.perf_counter() - start) / jobs * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--jobs", type=int, default=None, help="Jobs per measurement (100, --quick 40).")
    parser.add_argument("--rounds", type=int, default=None, help="Alternated rounds (5, --quick 3).")
    args = parser.parse_args()
    jobs = args.jobs or (40 if args.quick else 100)
    rounds = args.rounds or (3 if args.quick else 5)
    common.header(f"engine commits: {jobs} no-op jobs in-process per measurement, {rounds} rounds")
    common.print_machine()
    report = common.Report("engine_commits")
    with (
        common.bench_database("commits", keep=args.keep) as (_, url),
        common.temp_dir("commits", args.keep) as tmp,
    ):
        env = common.base_env(settings="tests.settings", database_url=url, var_dir=tmp, DB_CONN_MAX_AGE="60")
        common.setup_django(env)
        common.migrate()
        from django.conf import settings

        per_job_ms(10, "warm")
        relaxed: list[float] = []
        durable: list[float] = []
        for r in range(rounds):
            for setting, out in ((True, relaxed), (False, durable)):
                settings.JOBS_RELAXED_COMMIT = setting
                out.append(per_job_ms(jobs, f"{r}-{setting}"))
            say(f"round {r + 1}: relaxed {relaxed[-1]:.2f} ms/job, all durable {durable[-1]:.2f} ms/job")
    ratios = [d / x for x, d in zip(relaxed, durable, strict=True)]
    report.figures.update({"relaxed_ms": relaxed, "durable_ms": durable, "speedup": ratios})
    report.notes.append(
        f"relaxed commits: {statistics.median(relaxed):.2f} ms/job, all durable "
        f"{statistics.median(durable):.2f} ms/job; speed-up (median of round ratios) "
        f"{statistics.median(ratios):.2f}x"
    )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
