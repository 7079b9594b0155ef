"""Dense ranking inside PostgreSQL with pgvector: HNSW (cosine), filters in the same query.

When the server offers the ``vector`` extension, the search schema (``schema.ensure``) creates it
and adds ``ChunkVector.embedding vector`` (no fixed dimension: each embedder has its own). The
embedding stage then writes the vector there, and only there (``ChunkVector.vector`` stays empty:
one copy). Each embedder gets a partial expression index over the vector at half precision,
``hnsw ((embedding::halfvec(D)) halfvec_cosine_ops) WITH (m = 32, ef_construction = 128) WHERE
embedder = '<name>'`` (``HNSW_M``, ``HNSW_EF_CONSTRUCTION``), created the first time a worker
embeds with it; queries repeat that expression so the planner can use it.
Half precision halves the graph's size (about 1 GB for 1M vectors of 384 dimensions instead of
2 GB), so more of it stays in memory and each step of a search reads half the bytes; the
candidates it finds are ordered again by their full-precision distance.

Filters (tenant, published version, documents, collections, attributes) are checked in the
same query as the index scan, and the scan continues past candidates they reject
(``hnsw.iterative_scan``, pgvector 0.8), so ``k`` is never lost to a filter; how many
candidates the graph search keeps (``hnsw.ef_search``) follows how selective the filter is
near the query (see ``nearest``).

A filter that keeps few of the query's neighbours (a department among ten in a large tenant)
would have the graph walked far past them; such a scope, up to ``QUANTISED_BELOW`` vectors, is
ranked instead by every one of its vectors' binary codes (``documents.retrieval.codes``), and
the nearest codes are ordered again by their full vectors: recall does not depend on a graph
over other rows, and the cost grows with the scope, not with the tenant.
"""

# long-module: one ranking plan (exact, probe, codes, filtered graph) whose thresholds are
# tuned together; split, each part would need the others' constants to be read.

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import transaction

from documents.retrieval import codes

COLUMN = "embedding"
_ENABLED: dict[tuple[Any, ...], bool] = {}
# When the column was last found missing, per database: a server without pgvector is asked again
# only after ABSENT_RECHECK_SECONDS (a migration in another process may add the column; one in
# this process clears the entry at once, ``ensure_schema``). Asked on every call, the catalogue
# read was 4 of a small document's statements on such a server (bench/README.md, "Where the
# PostgreSQL wall time goes").
_ABSENT: dict[tuple[Any, ...], float] = {}
ABSENT_RECHECK_SECONDS = 60.0
_INDEXED: set[tuple[Any, ...]] = set()


def _key(connection: Any) -> tuple[Any, ...]:
    s = connection.settings_dict
    return (s.get("HOST"), s.get("PORT"), s.get("NAME"))


def enabled(connection: Any) -> bool:
    """Whether ``connection``'s database ranks vectors with pgvector (its schema has the column)."""
    if connection.vendor != "postgresql":
        return False
    key = _key(connection)
    if key not in _ENABLED:
        checked = _ABSENT.get(key)
        if checked is not None and time.monotonic() - checked < ABSENT_RECHECK_SECONDS:
            return False
        with connection.cursor() as cursor:
            # The catalogue itself, not information_schema's view over it (about 10 ms a call).
            cursor.execute(
                "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('documents_chunkvector') "
                "AND attname = %s AND NOT attisdropped",
                [COLUMN],
            )
            found = cursor.fetchone() is not None
        if not found:
            _ABSENT[key] = time.monotonic()
            return False
        _ABSENT.pop(key, None)
        _ENABLED[key] = True
    return _ENABLED[key]


def ensure_schema(connection: Any) -> None:
    """Create the extension and the column when the server offers pgvector (idempotent)."""
    _ABSENT.pop(_key(connection), None)  # whatever it finds, the next ``enabled`` asks again
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor.execute(f"ALTER TABLE documents_chunkvector ADD COLUMN IF NOT EXISTS {COLUMN} vector")
        codes.ensure_schema(cursor, COLUMN)


def literal(vector: npt.NDArray[np.float32]) -> str:
    """pgvector's text form of ``vector``."""
    return "[" + ",".join(map(repr, vector.tolist())) + "]"  # tolist: Python floats, as float(x)


# The graph's build parameters (pgvector's defaults are m = 16, ef_construction = 64). Each vector
# keeps up to 2 x HNSW_M links and the build weighs HNSW_EF_CONSTRUCTION candidates for them: on
# the benchmark's clustered vectors at 300k (bench/README.md, "The graph's recall: realistic
# queries and a larger graph"), at ef_search 1,000, the defaults' graph kept 0.84-0.85 of the
# exact top 10 on the worst-case queries and 0.90-0.92 on the realistic ones, this one 0.93 and
# 0.97, for a build about 2.2 times as long.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 128


def index_name(embedder: str) -> str:
    # The name says the index's shape: a change of shape is a new name, which ``build_indexes``
    # builds beside the old one before dropping it.
    return "documents_chunkvector_hnswm_" + hashlib.sha256(embedder.encode()).hexdigest()[:12]


def _old_index_names(embedder: str) -> list[str]:
    # The indexes it replaces: full precision (``vector``), then half precision with pgvector's
    # default build parameters.
    digest = hashlib.sha256(embedder.encode()).hexdigest()[:12]
    return [f"documents_chunkvector_hnsw_{digest}", f"documents_chunkvector_hnswh_{digest}"]


def indexed(dimension: int, column: str = f"v.{COLUMN}") -> str:
    """The indexed expression: the vector at half precision (``halfvec``)."""
    return f"({column}::halfvec({int(dimension)}))"


def _create_index(name: str, dimension: int, *, concurrently: bool = False) -> str:
    """``CREATE INDEX`` of the HNSW index ``name`` (its embedder is the statement's parameter)."""
    how = "CONCURRENTLY" if concurrently else "IF NOT EXISTS"
    return (
        f"CREATE INDEX {how} {name} ON documents_chunkvector USING hnsw "
        f"({indexed(dimension, COLUMN)} halfvec_cosine_ops) "
        f"WITH (m = {int(HNSW_M)}, ef_construction = {int(HNSW_EF_CONSTRUCTION)}) WHERE embedder = %s"
    )


def ensure_index(connection: Any, embedder: str, dimension: int) -> None:
    """The HNSW index of ``embedder``'s vectors (created once; cheap when it exists)."""
    key = (*_key(connection), embedder)
    if key in _INDEXED:
        return
    name = index_name(embedder)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [name])
        if cursor.fetchone() is None:
            # Two workers may race here: the loser's CREATE fails, and the index exists anyway.
            try:
                with transaction.atomic(using=connection.alias):
                    cursor.execute(_create_index(name, dimension), [embedder])
                    for old in _old_index_names(embedder):
                        cursor.execute(f"DROP INDEX IF EXISTS {old}")
            except Exception:
                cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [name])
                if cursor.fetchone() is None:
                    raise
    _INDEXED.add(key)


def build_indexes(connection: Any) -> list[str]:
    """Build, without blocking writes, the HNSW index of every embedder that has vectors and no
    valid index yet, and drop what it replaces (``manage.py search_index``; an upgrade's step
    before the workers start on a large table). Returns what it did, a line per embedder.

    The embedding stage builds a missing index itself (``ensure_index``), inside its stage and
    holding writes to the vector table for as long as the build takes: fine for a new embedder
    (its rows arrive later), not for a million existing ones. ``CREATE INDEX CONCURRENTLY`` runs
    outside a transaction, so this runs in autocommit (a management command, not a request).
    """
    done: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT embedder, max(vector_dims({COLUMN})) FROM documents_chunkvector "
            f"WHERE {COLUMN} IS NOT NULL GROUP BY embedder ORDER BY embedder"
        )
        for embedder, dimension in cursor.fetchall():
            name = index_name(embedder)
            cursor.execute(
                "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE c.relname = %s",
                [name],
            )
            row = cursor.fetchone()
            if row is not None and row[0]:
                done.append(f"{embedder}: index {name} is in place")
                continue
            if row is not None:  # a concurrent build that was interrupted leaves an invalid index
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            cursor.execute(_create_index(name, int(dimension), concurrently=True), [embedder])
            for old in _old_index_names(embedder):
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {old}")
            done.append(f"{embedder}: built index {name} ({int(dimension)} dimensions)")
    return done


def write(
    connection: Any, version_id: Any, vectors: dict[int, npt.NDArray[np.float32]], embedder: str
) -> None:
    """Store ``embedder``'s vectors of the version's chunks (by ordinal) in the pgvector column
    (a chunk has one row per embedder while a re-index runs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE documents_chunkvector c SET {COLUMN} = u.e::vector "
            "FROM unnest(%s::int[], %s::text[]) AS u(o, e) "
            f"WHERE c.version_id = %s AND c.ordinal = u.o AND c.embedder = %s AND c.{COLUMN} IS NULL",
            [list(vectors), [literal(v) for v in vectors.values()], version_id, embedder],
        )


# Scopes with fewer entries than this are ranked exactly (filter first): cheaper than walking
# the graph past other tenants' and filtered-out rows.
EXACT_BELOW = 2000
# The first look at the graph: this many nearest vectors of the embedder, whatever their scope
# (pgvector's default hnsw.ef_search is 40; the probe sets none and finds up to that many).
PROBE = 40
# When at least this share of the probe is in scope, the graph serves the scope well.
GRAPH_SHARE = 0.5
# Otherwise (a selective filter) a scope of fewer vectors than this is ranked by its binary
# codes, every one of them read from the codes' index, and the RERANK x the wanted nearest
# codes (at least MIN_RERANK) are ordered again by their full vectors: no graph to fall out of,
# at a cost that grows with the scope (not with the tenant). On the benchmark's 1M vectors with
# a 10% filter, 400 re-ranked codes keep 99.6% of the exact top 10 and 97.5% of the top 50.
QUANTISED_BELOW = 300_000
RERANK = 8
MIN_RERANK = 400
# hnsw.ef_search is sized so that about OVERSAMPLE x (the wanted rows / the scope's share of
# the probe) candidates are found in the graph's first pass; pgvector caps it at 1,000.
OVERSAMPLE = 10
MAX_EF_SEARCH = 1000
# ... and never fewer than this: sized for recall, not only for the share, so the graph pass
# always searches pgvector's cap. On the benchmark's clustered vectors at 300k (bench/README.md,
# "The graph's recall: realistic queries and a larger graph"), with the graph built as below,
# filtered 50 % or not, 400 kept 0.87 of the exact top 10 on the worst-case queries and 0.93 on
# the realistic ones; 1,000 keeps 0.93 and 0.97, for a few ms more per search.
MIN_EF_SEARCH = 1000
# The filtered pass fetches this many times the wanted rows, to re-order them by full precision.
FETCH = 2


def ef_search_for(limit: int, share: float) -> int:
    """The graph pass's ``hnsw.ef_search`` for ``limit`` rows when ``share`` of the probe was in
    scope: ``OVERSAMPLE`` x the rows the share implies, at least ``MIN_EF_SEARCH``, at most
    pgvector's cap."""
    return min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, math.ceil(OVERSAMPLE * int(limit) / share)))


def nearest(
    connection: Any,
    join: str,
    where: str,
    params: list[Any],
    embedder: str,
    vector: npt.NDArray[np.float32],
    limit: int,
    documents: tuple[str, list[Any]] | None = None,
) -> list[tuple[int, float]]:
    """The ``limit`` entries nearest to ``vector`` among ``where``, as (id, cosine similarity).

    ``documents`` is the scope's condition on its documents ``d`` alone: their published
    versions hold a superset of what ``where`` admits, which is applied again to the final rows
    (None for the indexing stage's probe of one version).

    - A scope smaller than ``EXACT_BELOW`` entries (its size summed from its documents'
      published versions, whose entries the publish counts; or counted up to it) is ranked
      exactly: its rows first (tenant, visibility, filters), then their distances.
    - Otherwise a probe reads the ``PROBE`` nearest vectors of the HNSW index whatever their
      scope. If enough of them are in scope, they are the answer.
    - If less than ``GRAPH_SHARE`` of them were in scope, the filter is selective near the
      query, and a graph over every vector would have to be walked far past the scope's
      neighbours to find them (at 1M vectors and a 10% filter it misses half of them within
      pgvector's cap of 1,000 candidates). A scope of fewer than ``QUANTISED_BELOW`` vectors is
      then ranked by its binary codes (Hamming distance, read from the codes' index only) and
      the nearest ``RERANK`` x ``limit`` codes are ordered again by their full vectors.
    - Otherwise the graph drives: ``ORDER BY`` the half-precision distance ``LIMIT`` over the
      vectors alone, each candidate checked against the scope by a correlated subquery (kept
      as a per-row check, not a join that would bypass the index), ``hnsw.ef_search`` set from
      the probe's share (a 10% filter needs ten times the candidates for the same recall) and
      never under ``MIN_EF_SEARCH`` (``ef_search_for``), and
      an iterative scan (``relaxed_order``) until ``limit`` rows in scope are found. If it still
      ends short (``hnsw.max_scan_tuples``), the exact plan answers.

    The candidates the index or the codes find are ordered again by their full-precision distance.
    """
    dimension = int(vector.shape[0])
    half = f"{indexed(dimension)} <=> %s::halfvec({dimension})"
    full = f"(v.{COLUMN}::vector({dimension})) <=> %s::vector({dimension})"
    query = literal(vector)
    entries = f"FROM documents_indexentry e {join} WHERE {where}"
    exact = (
        f"SELECT e.id, {full} AS dist FROM documents_chunkvector v "
        f"JOIN documents_indexentry e ON e.version_id = v.version_id AND e.ordinal = v.ordinal {join} "
        f"WHERE v.embedder = %s AND {where} ORDER BY dist LIMIT %s"
    )
    entry = f"(SELECT e.id {entries} AND e.version_id = v.version_id AND e.ordinal = v.ordinal)"
    probe = (
        f"SELECT {entry} AS eid, {full} AS dist FROM documents_chunkvector v "
        f"WHERE v.embedder = %s ORDER BY {half} LIMIT %s"
    )
    filtered = (
        f"SELECT {entry} AS eid, {full} AS dist FROM documents_chunkvector v "
        f"WHERE v.embedder = %s AND {entry} IS NOT NULL ORDER BY {half} LIMIT %s"
    )
    rows: list[Any] = []
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        size, uncounted = (
            (0, True) if documents is None else codes.scope_size(cursor, documents, QUANTISED_BELOW)
        )
        if uncounted:
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 {entries} LIMIT %s) s", [*params, EXACT_BELOW])
            large = cursor.fetchone()[0] >= EXACT_BELOW
        else:
            large = size >= EXACT_BELOW
        if large:
            cursor.execute(probe, [*params, query, embedder, query, PROBE])
            seen = cursor.fetchall()
            rows = [(i, d) for i, d in seen if i is not None]
            share = max(1, len(rows)) / max(1, len(seen))
            by_codes = False
            if share < GRAPH_SHARE and documents is not None:
                if uncounted and size < QUANTISED_BELOW:
                    size = codes.vectors_in(cursor, documents, QUANTISED_BELOW)
                by_codes = size < QUANTISED_BELOW
                if by_codes:
                    rerank = max(MIN_RERANK, RERANK * int(limit))
                    entries_sql = (join, where, params)
                    coded = literal(codes.asked(vector, embedder))
                    rows = codes.nearest(
                        cursor, documents, embedder, query, coded, full, entries_sql, limit, rerank
                    )
            if not by_codes:
                ef_search = ef_search_for(limit, share)
                if len(rows) < limit or ef_search > PROBE:
                    cursor.execute(
                        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                        "set_config('hnsw.ef_search', %s, true)",
                        [str(ef_search)],
                    )
                    cursor.execute(filtered, [*params, query, embedder, *params, query, FETCH * int(limit)])
                    rows = cursor.fetchall()
        if len(rows) < limit:
            cursor.execute(exact, [query, embedder, *params, limit])
            rows = cursor.fetchall()
    # A zero vector (a chunk with nothing to embed) has no cosine: NaN, which is no neighbour.
    found = [(int(i), 1.0 - float(d)) for i, d in rows if d is not None and not math.isnan(float(d))]
    return sorted(found, key=lambda r: -r[1])[:limit]
