"""Benchmark 6: peak RSS of a worker ingesting a 1,000-page text PDF.

Each measurement runs in its own child process, read with ``os.wait4`` (the child's own
``ru_maxrss``): (a) the worker: Django set up, the PDF uploaded, then ``run_job`` in-process
(parse, OCR skipped, chunk, embed, index, publish), on SQLite and on PostgreSQL; (b) baseline: the
same engines called directly (parse + chunk + embed, nothing stored); (c) baseline: an idle worker
(Django set up, migrated, nothing run). The worker child also reports its peak just before
``run_job``, so the job's own growth is visible.

Target: worker peak RSS <= 400 MB.

    .venv/bin/python bench/memory.py [--quick] [--pages N] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

TARGET_MB = 400.0


def self_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child(mode: str, pdf: Path) -> dict[str, Any]:
    import time

    out: dict[str, Any] = {"mode": mode}
    if mode == "plain":
        from bench.overhead import plain_pipeline

        start = time.perf_counter()
        out["shape"] = plain_pipeline(pdf)
        out["seconds"] = time.perf_counter() - start
        return out
    common.migrate()
    if mode == "idle":
        from django.db import connection

        connection.ensure_connection()
        return out
    from documents.models import Tenant
    from documents.services.upload import document_upload
    from jobs.executor import run_job
    from jobs.models import Job

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    result = document_upload(tenant=tenant, data=pdf.read_bytes(), filename="big.pdf")
    assert result.job is not None
    out["peak_before_run_job_mb"] = self_peak_mb()
    start = time.perf_counter()
    run_job(result.job.pk, worker="bench-memory")
    out["seconds"] = time.perf_counter() - start
    job = Job.objects.get(pk=result.job.pk)
    out["status"] = job.status
    if job.status != "ready":
        raise RuntimeError(f"job ended {job.status}/{job.stage} {job.error_code}")
    return out


def run_child(args: argparse.Namespace) -> int:
    common.setup_django(json.loads(args.child_env))
    result = child(args.child, Path(args.pdf))
    result["peak_self_mb"] = self_peak_mb()
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def measure(mode: str, env: dict[str, str], pdf: Path) -> dict[str, Any]:
    proc = subprocess.Popen(
        [common.PYTHON, __file__, "--child", mode, "--child-env", json.dumps(env), "--pdf", str(pdf)],
        env=env,
        cwd=common.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Read the pipes fully before reaping: os.wait4 gives this child's own peak RSS.
    stdout, stderr = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{mode} child failed:\n{stdout[-2000:]}\n{stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT ") :])
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--pages", type=int, default=None, help="PDF pages (default 1000, --quick 200).")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    parser.add_argument("--pdf", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return run_child(args)
    pages = args.pages or (200 if args.quick else 1000)

    common.header(f"memory: peak RSS of a worker ingesting a {pages}-page text PDF")
    common.print_machine()
    report = common.Report("memory")
    with common.temp_dir("memory", args.keep) as tmp:
        pdf = tmp / "big.pdf"
        pdf.write_bytes(common.text_pdf(pages))
        assert common.pdf_pages(pdf) == pages
        say(f"generated {pdf.name}: {pages} pages, {pdf.stat().st_size / 1024:.0f} KiB")
        base = common.base_env(settings="config.settings", database_url="", var_dir=tmp / "plain")
        plain = measure("plain", base, pdf)
        say(
            f"baseline, plain engines (parse + chunk + embed): peak {plain['peak_rss_mb']:.0f} MB, "
            f"{plain['shape']['chunks']} chunks, {plain['seconds']:.1f} s"
        )
        for backend in args.backends.split(","):
            ctx = (
                common.bench_database("memory", keep=args.keep)
                if backend == "postgres"
                else contextlib.nullcontext(("", ""))
            )
            with ctx as (_, url):
                env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp / backend)
                idle = measure("idle", env, pdf)
                worker = measure("worker", env, pdf)
            say(
                f"[{backend}] worker: peak {worker['peak_rss_mb']:.0f} MB (before run_job "
                f"{worker['peak_before_run_job_mb']:.0f} MB, run_job {worker['seconds']:.1f} s); "
                f"idle worker {idle['peak_rss_mb']:.0f} MB"
            )
            report.figures[backend] = {"worker": worker, "idle": idle}
            report.check(
                f"{backend}: worker peak RSS",
                worker["peak_rss_mb"],
                TARGET_MB,
                higher_is_better=False,
                unit=" MB",
            )
        report.figures["plain"] = plain
        report.figures["pages"] = pages
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
