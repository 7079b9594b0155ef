"""Benchmark: re-indexing a tenant of N chunks while it is being searched (bench/README.md, "Re-index").

The embedders are the hashing pair, 1024 -> 512 dimensions (``hashing-v1-1024`` to
``hashing-v1-512``): no model, so the figure is the re-index machinery's (the queries, fenced
batch writes, progress and the switch), not a model's speed; the default model embeds a few
chunks per second per worker on this machine, and that bounds a real re-index instead (see
bench/README, "Embedding model"). Chunks are synthetic text (60 words of a 5,000-word Zipf
vocabulary, 100 per document), their old vectors made by the real 1024 embedder and written with
bulk inserts, not through the ingestion pipeline.

Per backend (the SQLite default; PostgreSQL as installed, with or without pgvector), in a child
process with a private database: the re-index job runs through the engine in one thread (as one
worker would) while the main thread searches (hybrid, ``search()`` as the API calls it) without
pause. Figures: chunks/s of the job (start to ready), the switch commit and the removal of the
old vectors after it, search p50/p95 before and during the re-index, and that every search
during it answered (no empty answer).

    .venv/bin/python bench/reindex.py [--quick] [--chunks N] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import say

CHUNKS_PER_DOC = 100
WORDS_PER_CHUNK = 60
VOCABULARY = 5000


def word(i: int) -> str:
    letters, i = "", i + 26
    while i:
        i, r = divmod(i, 26)
        letters = chr(97 + r) + letters
    return "w" + letters


def build(n: int) -> Any:
    import numpy as np

    from documents.embedders import embedder_for
    from documents.models import Chunk, Document, DocumentVersion, IndexEntry, Tenant
    from documents.retrieval.text import search_text
    from documents.stages.embed import prepare_index, write_vectors

    rng = random.Random(7)
    weights = [1 / (r + 1) for r in range(VOCABULARY)]
    texts = [
        " ".join(rng.choices([word(w) for w in range(VOCABULARY)], weights, k=WORDS_PER_CHUNK))
        for _ in range(n)
    ]
    old = embedder_for("hashing:1024")
    tenant = Tenant.objects.create(slug="bench", name="Bench", active_embedder=old.name)
    docs = Document.objects.bulk_create(
        Document(tenant=tenant, title=f"doc {d}") for d in range((n + CHUNKS_PER_DOC - 1) // CHUNKS_PER_DOC)
    )
    versions = DocumentVersion.objects.bulk_create(
        DocumentVersion(
            document=d,
            number=1,
            file=f"bench/{d.pk}.txt",
            original_name="x.txt",
            kind="text",
            content_type="text/plain",
            size=1,
            sha256="0" * 64,
        )
        for d in docs
    )
    for d, v in zip(docs, versions, strict=True):
        d.published_version = v
    Document.objects.bulk_update(docs, ["published_version"], batch_size=2000)
    for number, version in enumerate(versions):
        part = texts[number * CHUNKS_PER_DOC : (number + 1) * CHUNKS_PER_DOC]
        chunks = Chunk.objects.bulk_create(
            Chunk(version=version, ordinal=o, text=t, page_start=1, page_end=1) for o, t in enumerate(part)
        )
        vectors = np.asarray(old.embed(part), dtype=np.float32)
        prepare_index(old, vectors)
        write_vectors(version, 0, old, list(range(len(part))), vectors)
        IndexEntry.objects.bulk_create(
            IndexEntry(
                tenant=tenant,
                document_id=version.document_id,
                version=version,
                chunk=c,
                ordinal=c.ordinal,
                batch=0,
                embedder=old.name,
                search_text=search_text(c.text),
            )
            for c in chunks
        )
    return tenant, texts


def child(n: int) -> dict[str, Any]:
    common.migrate()
    from django.db import connection

    from documents.models import ChunkVector, Tenant
    from documents.retrieval import pgvector
    from documents.search import search
    from documents.services.reindex import reindex_start
    from jobs.executor import run_job
    from jobs.models import Job

    started = time.perf_counter()
    tenant, texts = build(n)
    built = time.perf_counter() - started
    rng = random.Random(11)
    queries = [" ".join(rng.choice(texts).split()[10:14]) for _ in range(200)]

    def one_search() -> tuple[float, int]:
        t = time.perf_counter()
        hits = search(Tenant.objects.get(pk=tenant.pk), rng.choice(queries), k=10)
        return time.perf_counter() - t, len(hits)

    before = [one_search()[0] for _ in range(50)]
    job = reindex_start(tenant=tenant, embedder="hashing:512")
    finished = threading.Event()
    times: dict[str, float] = {}

    def worker() -> None:
        t = time.perf_counter()
        while run_job(job.pk) != "not claimed":
            pass
        times["job"] = time.perf_counter() - t
        connection.close()
        finished.set()

    during: list[float] = []
    empty = 0
    threading.Thread(target=worker, daemon=True).start()
    while not finished.is_set():
        seconds, hits = one_search()
        during.append(seconds)
        empty += hits == 0
    job = Job.objects.get(pk=job.pk)
    switched = job.finished_at
    # The reaper's sweep, without waiting for the grace (REINDEX_RETIRE_GRACE_SECONDS).
    from django.conf import settings

    from documents.services.reindex import retired_vectors_sweep

    settings.REINDEX_RETIRE_GRACE_SECONDS = 0
    t = time.perf_counter()
    retired_vectors_sweep(10)
    times["removal"] = time.perf_counter() - t
    return {
        "backend": connection.vendor + (" + pgvector" if pgvector.enabled(connection) else ""),
        "chunks": n,
        "build_s": round(built, 1),
        "job_status": job.status,
        "job_s": round(times["job"], 2),
        "chunks_per_s": round(n / times["job"], 1),
        "search_before_ms": [round(common.percentile(before, p) * 1000, 1) for p in (50, 95)],
        "search_during_ms": [round(common.percentile(during, p) * 1000, 1) for p in (50, 95)],
        "searches_during": len(during),
        "old_vectors_removal_s": round(times["removal"], 2),
        "empty_answers": empty,
        "old_vectors_left": ChunkVector.objects.filter(embedder="hashing-v1-1024").count(),
        "new_vectors": ChunkVector.objects.filter(embedder="hashing-v1-512").count(),
        "switched_at": switched.isoformat() if switched else None,
        "active": Tenant.objects.get(pk=tenant.pk).active_embedder,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--chunks", type=int, default=None, help="Chunks (default 20,000, --quick 2,000).")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-env", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.chunks or (2000 if args.quick else 20000)
    if args.child:
        common.setup_django(json.loads(args.child_env))
        print("RESULT " + json.dumps(child(n)), flush=True)
        return 0
    common.header(f"re-index: {n} chunks, hashing 1024 -> 512 dimensions, searched throughout")
    common.print_machine()
    report = common.Report("reindex")
    with common.temp_dir("reindex", args.keep) as tmp:
        for backend in args.backends.split(","):
            ctx = common.bench_database("reindex", keep=args.keep) if backend == "postgres" else None
            with ctx or contextlib.nullcontext(("", "")) as (_, url):
                env = common.base_env(
                    settings="config.settings",
                    database_url=url,
                    var_dir=tmp / backend,
                    EMBEDDINGS_BACKEND="hashing",
                    EMBEDDING_BATCH_SIZE="256",
                )
                command = [common.PYTHON, __file__, "--child", backend, "--child-env", json.dumps(env)]
                proc = subprocess.run(
                    [*command, "--chunks", str(n)],
                    env=env,
                    cwd=common.ROOT,
                    capture_output=True,
                    text=True,
                    timeout=7200,
                )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                say(proc.stdout[-3000:] + proc.stderr[-3000:])
                raise SystemExit(f"{backend} child failed")
            result = json.loads(lines[-1][len("RESULT ") :])
            say(json.dumps(result, indent=2))
            report.figures[backend] = result
            report.check(
                f"{backend}: empty answers during the re-index",
                result["empty_answers"],
                0,
                higher_is_better=False,
            )
            report.check(
                f"{backend}: old vectors left", result["old_vectors_left"], 0, higher_is_better=False
            )
            report.check(f"{backend}: chunks re-embedded", result["new_vectors"], n, higher_is_better=True)
    report.print()
    report.dump(args.json)
    return 0 if all(v.passed for v in report.verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
