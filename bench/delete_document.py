"""Benchmark: deleting a 1,000-page document (bench/README.md, "Lifecycle: deleting a 1,000-page document").

A text PDF of N pages is ingested in-process (``document_upload`` + ``run_job``), then deleted with
the delete service, on SQLite and on PostgreSQL (each in its own child process and private
database). Figures: the time until the request's commit (from then on the document is no search
hit and in no list), the time of the after-commit cleanup (derived rows, stored file, version and
document rows), the rows and files it removed, and what was left (must be 0).

    .venv/bin/python bench/delete_document.py [--quick] [--pages N] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say


def child(pdf: Path) -> dict[str, Any]:
    common.migrate()
    from django.db import connection, transaction

    from documents.models import Deletion, Tenant
    from documents.search import search
    from documents.services.delete import document_delete
    from documents.services.publish import OUTPUTS_BY_STAGE
    from documents.services.upload import document_upload
    from jobs.executor import run_job

    tenant = Tenant.objects.create(slug="bench", name="Bench")
    result = document_upload(tenant=tenant, data=pdf.read_bytes(), filename="big.pdf")
    assert result.job is not None
    while run_job(result.job.pk) != "not claimed":
        pass
    version = result.version.pk

    def rows() -> dict[str, int]:
        return {
            m._meta.label: m.objects.filter(version_id=version).count()
            for _, ms in OUTPUTS_BY_STAGE
            for m in ms
        }

    before = rows()
    marks: dict[str, float] = {}
    start = time.perf_counter()
    with transaction.atomic():
        # Registered first, so it runs first after the commit: the moment the delete is visible.
        transaction.on_commit(lambda: marks.setdefault("commit", time.perf_counter()))
        document_delete(tenant=tenant, document_id=result.document.pk)
    end = time.perf_counter()
    deletion = Deletion.objects.get(document_id=result.document.pk)
    media = Path(str(result.version.file.storage.path(result.version.file.name)))
    return {
        "backend": connection.vendor,
        "rows_before": before,
        "commit_s": marks["commit"] - start,
        "cleanup_s": end - marks["commit"],
        "rows_removed": deletion.rows_removed,
        "files_removed": deletion.files_removed,
        "cleaned": deletion.cleaned_at is not None,
        "rows_left": sum(rows().values()),
        "file_left": media.exists(),
        "hits_after": len(search(tenant, "page", 5)),
    }


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
        common.setup_django(json.loads(args.child_env))
        print("RESULT " + json.dumps(child(Path(args.pdf))), flush=True)
        return 0
    pages = args.pages or (200 if args.quick else 1000)
    common.header(f"delete: a {pages}-page document, ingested then deleted")
    common.print_machine()
    report = common.Report("delete_document")
    with common.temp_dir("delete", args.keep) as tmp:
        pdf = tmp / "big.pdf"
        pdf.write_bytes(common.text_pdf(pages))
        for backend in args.backends.split(","):
            ctx = common.bench_database("delete", keep=args.keep) if backend == "postgres" else None
            with ctx or contextlib.nullcontext(("", "")) as (_, url):
                env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp / backend)
                command = [common.PYTHON, __file__, "--child", backend, "--child-env", json.dumps(env)]
                proc = subprocess.run(
                    [*command, "--pdf", str(pdf)],
                    env=env,
                    cwd=common.ROOT,
                    capture_output=True,
                    text=True,
                    timeout=3600,
                )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                say(proc.stdout[-3000:] + proc.stderr[-3000:])
                raise SystemExit(f"{backend} child failed")
            result = json.loads(lines[-1][len("RESULT ") :])
            total = sum(result["rows_before"].values())
            say(f"\n[{backend}] {pages} pages: {total} derived rows ({result['rows_before']})")
            say(f"  gone from search and lists at the commit: {result['commit_s'] * 1000:.1f} ms")
            rate = total / max(result["cleanup_s"], 1e-9)
            say(
                f"  cleanup after the commit: {result['cleanup_s']:.3f} s, removed "
                f"{result['rows_removed']} rows and {result['files_removed']} file(s) ({rate:,.0f} rows/s)"
            )
            say(
                f"  left: {result['rows_left']} rows, file left: {result['file_left']}, "
                f"hits after: {result['hits_after']}"
            )
            report.figures[backend] = result
            if result["rows_left"] or result["file_left"] or result["hits_after"] or not result["cleaned"]:
                raise SystemExit(f"{backend}: the delete left something behind")
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
