"""The HNSW graph's recall@10 and time against its settings, on ``permissions.py``'s kept data.

For each setting (``hnsw.ef_search`` floor, rows fetched from the graph and re-ordered by full
precision) the dense ranking (``search_index().dense``, as ``search()`` calls it) is measured
unfiltered and with the 50 % grant, forced onto the graph (the codes path off), for both recall
query sets of ``permissions.py`` (the worst case and the realistic one). ``--rebuild M,EFC``
then rebuilds the embedder's HNSW index with those build parameters (timed) and measures again.

    .venv/bin/python bench/permissions.py --data-dir DIR --pgvector-size N --backends pgvector
    .venv/bin/python bench/graph_recall.py --data-dir DIR --size N [--rebuild 32,128]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, permissions, search_scale
from bench.common import say

# (ef_search floor, rows fetched as a multiple of the 10 wanted)
SETTINGS = [(400, 2), (1000, 2), (1000, 120)]
QUERIES = 30


def rebuild(m: int, ef_construction: int) -> float:
    from django.db import connection

    from documents.embedders import configured_embedder
    from documents.retrieval import pgvector

    embedder = configured_embedder()
    name = pgvector.index_name(embedder.name)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '2GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        for old in [name, *pgvector._old_index_names(embedder.name)]:
            cursor.execute(f"DROP INDEX IF EXISTS {old}")
        cursor.execute(
            f"CREATE INDEX {name} ON documents_chunkvector USING hnsw "
            f"({pgvector.indexed(search_scale.DIM, pgvector.COLUMN)} halfvec_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {ef_construction}) WHERE embedder = %s",
            [embedder.name],
        )
    return round(time.perf_counter() - started, 1)


def measure(n: int, rebuild_with: str) -> dict[str, Any]:
    """The grid on the index as built, then (``rebuild_with``) on the rebuilt one."""
    out: dict[str, Any] = {}
    out["as built"] = grid(n)
    if rebuild_with:
        m, efc = (int(x) for x in rebuild_with.split(","))
        out["rebuild_s"] = rebuild(m, efc)
        say(f"rebuilt m={m} ef_construction={efc} in {out['rebuild_s']} s")
        out[f"m={m} ef_construction={efc}"] = grid(n)
    return out


def grid(n: int) -> dict[str, Any]:
    import numpy as np

    from documents.embedders import configured_embedder
    from documents.models import IndexEntry, Tenant
    from documents.retrieval import backends, pgvector
    from documents.retrieval.index import search_index

    out: dict[str, Any] = {}
    tenant = Tenant.objects.get(slug="scale")
    embedder = configured_embedder()
    vectors = np.load(Path(os.environ["VAR_DIR"]) / "vectors.npy")
    entry_ids = np.array(
        list(IndexEntry.objects.filter(tenant=tenant).order_by("id").values_list("id", flat=True)),
        dtype=np.int64,
    )
    doc_of_row = np.arange(n) // search_scale.CHUNKS_PER_DOC
    pgvector.GRAPH_SHARE = 0.0  # the graph path only: no share of the probe sends it to the codes
    for name, key in {"unfiltered": None, "50%": "group:50"}.items():
        viewer = permissions.viewer(tenant.pk, key)
        scope = backends.Scope(tenant_id=tenant.pk, embedder=embedder.name, principals=viewer.principals)
        mask = None if key is None else doc_of_row % 2 == 0
        for queries in permissions.QUERY_SETS:
            rng = np.random.default_rng(13)
            qs = [permissions.recall_query(vectors, rng, queries) for _ in range(QUERIES)]
            exact = []
            for q in qs:
                scores = vectors @ q
                if mask is not None:
                    scores[~mask] = -np.inf
                exact.append(set(entry_ids[np.argsort(-scores)[:10]].tolist()))
            for floor, fetch in SETTINGS:
                pgvector.MIN_EF_SEARCH, pgvector.FETCH = floor, fetch
                recalls, times = [], []
                for q, want in zip(qs, exact, strict=True):
                    t = time.perf_counter()
                    found = {i for i, _ in search_index().dense(scope, q, 10, tokens=[])}
                    times.append((time.perf_counter() - t) * 1000)
                    recalls.append(len(found & want) / 10)
                key_ = f"{name} {queries} ef{floor} fetch{fetch * 10}"
                out[key_] = {
                    "recall": round(float(np.mean(recalls)), 3),
                    "median_ms": round(statistics.median(times), 1),
                    "load": round(os.getloadavg()[0], 1),
                }
                say(f"{key_}: {out[key_]}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--rebuild", default="", help="M,EF_CONSTRUCTION: rebuild the index first")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        common.setup_django(dict(os.environ))
        print("RESULT " + json.dumps(measure(args.size, args.rebuild)), flush=True)
        return
    tmp = Path(args.data_dir).resolve() / f"permissions-pgvector-{args.size}"
    server = search_scale.pgvector_server(tmp / "pg", keep=True)
    try:
        socket_dir = str(server.get_postmaster_info().socket_dir).replace("/", "%2F")
        url = f"postgres://postgres@{socket_dir}/bench_permissions_{args.size}"
        extra = {"EMBEDDINGS_BACKEND": "hashing", "EMBEDDINGS_HASHING_DIMENSION": str(search_scale.DIM)}
        env = common.base_env(settings="config.settings", database_url=url, var_dir=tmp, **extra)
        command = [common.PYTHON, __file__, "--child", "--data-dir", args.data_dir, "--size", str(args.size)]
        if args.rebuild:
            command += ["--rebuild", args.rebuild]
        result = common.child_result(command, env, timeout=7200, what="graph recall")
        say(json.dumps(result))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
