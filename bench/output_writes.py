"""Overhead target, attribution: the stages' output writes, ``bulk_create`` against ``insert_rows``.

One 100-page text PDF goes through the platform once (hashing embedder); then the same rows it
wrote (100 pages, its chunks, a vector per chunk in batches of 64, an index entry per chunk with
its search text) are written again under new keys, alternately the way the stages wrote them
before (``bulk_create``: a model per row, every value spelled into the SQL text on PostgreSQL)
and the way they write them now (``documents.bulk_insert.insert_rows``: one statement per batch,
``unnest`` arrays bound by the server on PostgreSQL, ``executemany`` on SQLite). Each write runs
in a transaction rolled back afterwards, after checking that it wrote every row. Medians of the
alternated rounds, SQLite and PostgreSQL each in a child process (as ``overhead.py``).

    .venv/bin/python bench/output_writes.py [--rounds N] [--pages N] [--backends sqlite,postgres]
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


class _Rollback(Exception):
    pass


def child(pdf: Path, rounds: int) -> dict[str, Any]:
    import numpy as np
    from django.db import transaction

    from bench.overhead import platform_pipeline
    from documents.bulk_insert import insert_rows
    from documents.models import Chunk, ChunkVector, DocumentVersion, IndexEntry, Page, Tenant
    from documents.retrieval.text import search_text
    from documents.stages.chunk import CHUNK_FIELDS
    from documents.stages.embed import VECTOR_FIELDS
    from documents.stages.index import ENTRY_FIELDS
    from documents.stages.parse import PAGE_FIELDS

    common.migrate()
    tenant = Tenant.objects.create(slug="bench-writes", name="Bench")
    out = platform_pipeline(tenant, pdf.read_bytes(), "writes.pdf")
    v = DocumentVersion.objects.select_related("document").get(job_id=out["job"])
    pages = list(Page.objects.filter(version=v).values_list("number", "text", "needs_ocr", "blocks"))
    chunks = list(
        Chunk.objects.filter(version=v).values_list(
            "ordinal", "text", "page_start", "page_end", "heading_path"
        )
    )
    vectors = np.random.default_rng(7).random((len(chunks), 1024), dtype=np.float32)
    batches = [range(s, min(s + 64, len(chunks))) for s in range(0, len(chunks), 64)]
    shift = 100_000  # new keys beside the version's own rows
    tenant_id, document_id = v.document.tenant_id, v.document_id

    def old() -> None:
        Page.objects.bulk_create(
            [Page(version=v, number=n + shift, text=t, needs_ocr=o, blocks=b) for n, t, o, b in pages],
            ignore_conflicts=True,
        )
        Chunk.objects.bulk_create(
            [
                Chunk(version=v, ordinal=o + shift, text=t, page_start=a, page_end=b, heading_path=h)
                for o, t, a, b, h in chunks
            ],
            batch_size=500,
        )
        for number, batch in enumerate(batches):
            ChunkVector.objects.bulk_create(
                [
                    ChunkVector(
                        version=v,
                        ordinal=chunks[i][0] + shift,
                        batch=number,
                        embedder="bench",
                        vector=vectors[i].tobytes(),
                    )
                    for i in batch
                ],
                ignore_conflicts=True,
            )
        made = Chunk.objects.filter(version=v, ordinal__gte=shift).only("pk", "ordinal", "text")
        IndexEntry.objects.bulk_create(
            [
                IndexEntry(
                    tenant_id=tenant_id,
                    document_id=document_id,
                    version=v,
                    chunk_id=c.pk,
                    ordinal=c.ordinal,
                    batch=0,
                    embedder="bench",
                    search_text=search_text(c.text),
                )
                for c in made
            ],
            ignore_conflicts=True,
        )

    def new() -> None:
        insert_rows(
            Page, PAGE_FIELDS, [(v.pk, n + shift, t, o, b, "", 0) for n, t, o, b in pages], skip_existing=True
        )
        insert_rows(Chunk, CHUNK_FIELDS, [(v.pk, o + shift, t, a, b, h) for o, t, a, b, h in chunks])
        for number, batch in enumerate(batches):
            rows = [(v.pk, chunks[i][0] + shift, number, "bench", vectors[i].tobytes()) for i in batch]
            insert_rows(ChunkVector, VECTOR_FIELDS, rows, skip_existing=True)
        made = Chunk.objects.filter(version=v, ordinal__gte=shift).values_list("pk", "ordinal", "text")
        rows = [(tenant_id, document_id, v.pk, pk, o, 0, "bench", search_text(t)) for pk, o, t in made]
        insert_rows(IndexEntry, ENTRY_FIELDS, rows, skip_existing=True)

    def timed(write: Any) -> float:
        try:
            with transaction.atomic():
                start = time.perf_counter()
                write()
                seconds = time.perf_counter() - start
                written = (
                    Page.objects.filter(version=v, number__gte=shift).count(),
                    ChunkVector.objects.filter(version=v, ordinal__gte=shift).count(),
                    IndexEntry.objects.filter(version=v, ordinal__gte=shift).count(),
                )
                if written != (len(pages), len(chunks), len(chunks)):
                    raise RuntimeError(f"wrote {written}")
                raise _Rollback
        except _Rollback:
            return seconds

    timed(old), timed(new)  # warm-up
    times: dict[str, list[float]] = {"bulk_create": [], "insert_rows": []}
    for _ in range(rounds):
        times["bulk_create"].append(timed(old))
        times["insert_rows"].append(timed(new))
    return {"pages": len(pages), "chunks": len(chunks), "times": times}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=None, help="Alternated rounds (default 9, --quick 5).")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    parser.add_argument("--pdf", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds or (5 if args.quick else 9)
    if args.child:
        common.setup_django(json.loads(args.child_env))
        print("RESULT " + json.dumps(child(Path(args.pdf), rounds)), flush=True)
        return 0

    common.header(f"output writes: a {args.pages}-page PDF's rows, bulk_create vs insert_rows")
    common.print_machine()
    report = common.Report("output_writes")
    with common.temp_dir("output-writes", args.keep) as tmp:
        pdf = tmp / "bench.pdf"
        pdf.write_bytes(common.text_pdf(args.pages))
        for backend in args.backends.split(","):
            ctx: Any = (
                common.bench_database("writes", keep=args.keep)
                if backend == "postgres"
                else contextlib.nullcontext(("", ""))
            )
            with ctx as (_, url):
                env = common.base_env(
                    settings="config.settings",
                    database_url=url,
                    var_dir=tmp / backend,
                    EMBEDDINGS_BACKEND="hashing",
                )
                command = [common.PYTHON, __file__, "--child", backend, "--child-env", json.dumps(env)]
                command += ["--pdf", str(pdf), "--rounds", str(rounds)]
                proc = subprocess.run(
                    command, env=env, cwd=common.ROOT, capture_output=True, text=True, timeout=1800
                )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                say(proc.stdout[-3000:] + proc.stderr[-3000:])
                raise SystemExit(f"{backend} child failed")
            result = json.loads(lines[-1][len("RESULT ") :])
            old = common.median(result["times"]["bulk_create"])
            new = common.median(result["times"]["insert_rows"])
            say(
                f"\n[{backend}] {result['pages']} pages, {result['chunks']} chunks, vectors and index entries"
            )
            for name, values in result["times"].items():
                say(
                    f"  {name}: {common.median(values) * 1000:.0f} ms ("
                    + ", ".join(f"{t * 1000:.0f}" for t in values)
                    + ")"
                )
            say(
                f"  saved {(old - new) * 1000:.0f} ms per document; "
                f"insert_rows / bulk_create {new / old:.2f}x"
            )
            report.figures[backend] = {**result, "bulk_create_s": old, "insert_rows_s": new}
            # Attribution for overhead.py's target, not a target of its own: a note, no verdict.
            report.notes.append(
                f"{backend}: insert_rows {new * 1000:.0f} ms, bulk_create {old * 1000:.0f} ms "
                f"({new / old:.2f}x)"
            )
    report.print()
    report.dump(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
