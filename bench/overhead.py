"""Benchmark 2: the platform's overhead on one 300-page text PDF.

The same PDF goes (a) through the platform, ``document_upload`` + ``run_job`` in-process (parse,
OCR skipped, chunk, embed, index with the probe search, publish), and (b) through a plain script
calling the same engines directly: ``documents.engines.parsing.parse``,
``documents.engines.chunking.chunk_pages`` and the configured embedder (batches of
EMBEDDING_BATCH_SIZE). Both in the same process, alternated, medians of several runs, on SQLite
(the embedded default) and on PostgreSQL, each backend in its own child process; once with the
default model (``EMBEDDINGS_BACKEND=local``, a smaller PDF: it embeds a few chunks per second) and
once with the hashing embedder (the harder case: a fast embedder leaves the platform's own costs
visible). Besides the ratio: the milliseconds per page the platform adds.

Also: the database statements per job and per page (CaptureQueriesContext over one upload +
run_job), and each stage's time from its stage run.

Target: platform / plain script <= 1.15.

    .venv/bin/python bench/overhead.py [--quick] [--pages N] [--runs N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say


def plain_pipeline(path: Path) -> dict[str, Any]:
    """parse + chunk + embed with the platform's engines and settings, nothing else."""
    from django.conf import settings

    from documents.embedders import configured_embedder
    from documents.engines.chunking import Block, ChunkInputPage, chunk_pages
    from documents.engines.parsing import parse
    from documents.engines.sniff import Kind

    t0 = time.perf_counter()
    pages = []
    for page in parse(path, Kind.PDF):
        blocks = tuple(Block(b.kind, b.text, b.level) for b in page.blocks if b.text.strip())
        pages.append(ChunkInputPage(number=page.number, blocks=blocks))
    t1 = time.perf_counter()
    chunks = chunk_pages(
        pages, target_tokens=int(settings.CHUNK_TARGET_TOKENS), max_tokens=int(settings.CHUNK_MAX_TOKENS)
    )
    t2 = time.perf_counter()
    embedder = configured_embedder()  # the platform's, built once per process like a worker's
    size = int(settings.EMBEDDING_BATCH_SIZE)
    vectors = 0
    for start in range(0, len(chunks), size):
        vectors += len(embedder.embed([c.text for c in chunks[start : start + size]]))
    t3 = time.perf_counter()
    return {
        "pages": len(pages),
        "chunks": len(chunks),
        "vectors": vectors,
        "phases": {"parse": t1 - t0, "chunk": t2 - t1, "embed": t3 - t2},
    }


def platform_pipeline(tenant: Any, data: bytes, name: str) -> dict[str, Any]:
    from documents.services.upload import document_upload
    from jobs.executor import run_job
    from jobs.models import Job, StageRun

    result = document_upload(tenant=tenant, data=data, filename=name)
    assert result.job is not None
    if result.version.reused_from_id is not None:
        raise RuntimeError("the upload was deduplicated: it would copy outputs, not process the PDF")
    outcome = run_job(result.job.pk, worker="bench-overhead")
    job = Job.objects.get(pk=result.job.pk)
    if job.status != "ready":
        raise RuntimeError(f"job ended {job.status}/{job.stage} ({job.error_code}): {outcome}")
    stages = {
        r.stage: (r.finished_at - r.started_at).total_seconds()
        for r in StageRun.objects.filter(job=job).order_by("started_at")
    }
    return {"job": job.pk, "stages": stages}


def child(backend: str, pdf: Path, runs: int) -> dict[str, Any]:
    """Runs inside the child process, configured for one backend."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.engine_throughput import classify
    from documents.models import Chunk, ChunkVector, IndexEntry, Page, Tenant

    common.migrate()
    data = pdf.read_bytes()
    tenants = iter(
        Tenant.objects.create(slug=f"bench-{i}", name="Bench", max_queued_jobs=10_000)
        for i in range(runs + 2)
    )

    # Warm-up: imports, caches and the first connection are paid once, outside the timings.
    # Each platform run uploads the same bytes into a tenant of its own (created outside the
    # timings): in one tenant, dedup would copy the first run's outputs instead of processing.
    plain_pipeline(pdf)
    platform_pipeline(next(tenants), data, "warmup.pdf")

    plain_times: list[float] = []
    plain_phases: dict[str, list[float]] = {}
    platform_times: list[float] = []
    stage_times: dict[str, list[float]] = {}
    shape: dict[str, int] = {}
    for i in range(runs):
        start = time.perf_counter()
        shape = plain_pipeline(pdf)
        plain_times.append(time.perf_counter() - start)
        for phase, seconds in shape.pop("phases").items():
            plain_phases.setdefault(phase, []).append(seconds)
        tenant = next(tenants)
        start = time.perf_counter()
        out = platform_pipeline(tenant, data, f"run-{i}.pdf")
        platform_times.append(time.perf_counter() - start)
        for stage, seconds in out["stages"].items():
            stage_times.setdefault(stage, []).append(seconds)

    # One more run under a statement capture (not timed: capturing costs time itself).
    with CaptureQueriesContext(connection) as captured:
        out = platform_pipeline(next(tenants), data, "counted.pdf")
    # An executemany is captured once, as "N times: <sql>": one statement here.
    sqls = [re.sub(r"^\d+ times: ", "", q["sql"]) for q in captured.captured_queries]
    kinds = Counter(classify(sql)[0] for sql in sqls)
    tables = Counter(
        f"{kind} {table}" for kind, table in map(classify, sqls) if kind in ("INSERT", "UPDATE", "DELETE")
    )
    from documents.models import DocumentVersion

    version = DocumentVersion.objects.get(job_id=out["job"])
    rows = {
        "pages": Page.objects.filter(version=version).count(),
        "chunks": Chunk.objects.filter(version=version).count(),
        "vectors": ChunkVector.objects.filter(version=version).count(),
        "index_entries": IndexEntry.objects.filter(version=version).count(),
    }
    return {
        "backend": backend,
        "shape": shape,
        "plain_s": plain_times,
        "platform_s": platform_times,
        "stage_s": {k: common.median(v) for k, v in stage_times.items()},
        "plain_phase_s": {k: common.median(v) for k, v in plain_phases.items()},
        "statements": dict(kinds),
        "writes_by_table": dict(tables),
        "rows": rows,
    }


def run_child(args: argparse.Namespace) -> int:
    env = json.loads(args.child_env)
    common.setup_django(env)
    result = child(args.child, Path(args.pdf), args.runs)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--pages", type=int, default=None, help="PDF pages (default 300, --quick 100).")
    parser.add_argument(
        "--runs", type=int, default=None, help="Timed runs per backend (default 5, --quick 2)."
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--embedders", default="local,hashing", help="EMBEDDINGS_BACKEND values to measure.")
    parser.add_argument(
        "--model-pages",
        type=int,
        default=None,
        help="PDF pages with the local model (default 40, --quick 20).",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    parser.add_argument("--pdf", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return run_child(args)
    pages = args.pages or (100 if args.quick else 300)
    runs = args.runs or (2 if args.quick else 5)
    model_pages = args.model_pages or (20 if args.quick else 40)

    common.header(f"overhead: a {pages}-page text PDF through the platform vs the plain engines")
    common.print_machine()
    report = common.Report("overhead")
    with common.temp_dir("overhead", args.keep) as tmp:
        for embedder in args.embedders.split(","):
            size = model_pages if embedder == "local" else pages
            measure(args, report, tmp, embedder, size, runs)
    report.print()
    report.dump(args.json)
    return 0


def measure(
    args: argparse.Namespace, report: common.Report, tmp: Path, embedder: str, pages: int, runs: int
) -> None:
    """One embedder on every backend: a child process per backend, the same PDF."""
    pdf = tmp / f"bench-{pages}.pdf"
    if not pdf.exists():
        pdf.write_bytes(common.text_pdf(pages))
    assert common.pdf_pages(pdf) == pages
    say(f"\nEMBEDDINGS_BACKEND={embedder}: {pdf.name}, {pages} pages, {pdf.stat().st_size / 1024:.0f} KiB")
    for backend in args.backends.split(","):
        if backend == "postgres":
            ctx = common.bench_database("overhead", keep=args.keep)
        else:
            import contextlib

            ctx = contextlib.nullcontext(("", ""))
        with ctx as (_, url):
            var = tmp / f"{backend}-{embedder}"
            env = common.base_env(
                settings="config.settings", database_url=url, var_dir=var, EMBEDDINGS_BACKEND=embedder
            )
            proc = subprocess.run(
                [
                    common.PYTHON,
                    __file__,
                    "--child",
                    backend,
                    "--child-env",
                    json.dumps(env),
                    "--pdf",
                    str(pdf),
                    "--runs",
                    str(runs),
                ],
                env=env,
                cwd=common.ROOT,
                capture_output=True,
                text=True,
                timeout=1800,
            )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            say(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"{backend} child failed")
        result = json.loads(lines[-1][len("RESULT ") :])
        plain = common.median(result["plain_s"])
        platform = common.median(result["platform_s"])
        ratio = platform / plain
        st = result["statements"]
        writes = sum(st.get(k, 0) for k in ("INSERT", "UPDATE", "DELETE"))
        label = f"{backend}, {embedder}"
        added_ms = (platform - plain) / pages * 1000
        say(f"\n[{label}] {result['shape']['pages']} pages -> {result['shape']['chunks']} chunks")
        say(
            f"  plain script: {plain:.3f} s (median of {runs}: "
            f"{', '.join(f'{t:.3f}' for t in result['plain_s'])})"
        )
        say(
            f"  platform:     {platform:.3f} s (median of {runs}: "
            f"{', '.join(f'{t:.3f}' for t in result['platform_s'])})  ratio {ratio:.2f}x, "
            f"{added_ms:+.2f} ms per page"
        )
        say(
            "  plain phases (median): "
            + ", ".join(f"{k} {v:.3f} s" for k, v in result["plain_phase_s"].items())
        )
        say(
            "  platform stage runs (median): "
            + ", ".join(f"{k} {v:.3f} s" for k, v in result["stage_s"].items())
        )
        say(
            f"  statements per job: {sum(st.values())} total; "
            + ", ".join(f"{k} {v}" for k, v in sorted(st.items()))
        )
        say(f"  writes per job: {writes} statements = {writes / pages:.2f} per page")
        say(
            "  writes by table: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(result["writes_by_table"].items()))
        )
        say("  rows written: " + ", ".join(f"{k} {v}" for k, v in result["rows"].items()))
        report.figures[label] = {
            **result,
            "plain_median_s": plain,
            "platform_median_s": platform,
            "ratio": ratio,
            "writes_per_job": writes,
            "writes_per_page": writes / pages,
            "added_ms_per_page": added_ms,
        }
        report.check(f"{label}: platform / plain", ratio, 1.15, higher_is_better=False, unit="x")
        report.notes.append(f"{label}: the platform adds {added_ms:.2f} ms per page")


if __name__ == "__main__":
    sys.exit(main())
