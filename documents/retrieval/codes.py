"""Binary codes of the pgvector column: a filtered scope ranked by every one of its vectors.

Each vector's sign bits (pgvector's ``binary_quantize``: 1 bit a dimension, 48 bytes at 384) are
kept by PostgreSQL itself as a generated column beside the vector, so they are never out of step
with it, and a B-tree holds them per version, so a scope's codes are read from the index alone,
not from the table. ``documents.retrieval.pgvector.nearest`` ranks a selective filter's scope
this way (Hamming distance over all of them, then the nearest few hundred by their full
vectors) instead of walking a graph over every vector of the embedder past them.
"""

from __future__ import annotations

from typing import Any

BITS = "embedding_bits"
BITS_INDEX = "documents_chunkvector_bits"
# The scope's condition over its documents ``d`` (SQL, parameters).
Documents = tuple[str, list[Any]]


def ensure_schema(cursor: Any, column: str) -> None:
    """The codes of ``column`` and their index (idempotent; an upgrade rewrites the table once)."""
    cursor.execute(
        f"ALTER TABLE documents_chunkvector ADD COLUMN IF NOT EXISTS {BITS} varbit "
        f"GENERATED ALWAYS AS (binary_quantize({column})) STORED"
    )
    cursor.execute(
        f"CREATE INDEX IF NOT EXISTS {BITS_INDEX} ON documents_chunkvector "
        f"(version_id, embedder) INCLUDE (ordinal, {BITS})"
    )


PUBLISHED = "FROM documents_document d JOIN documents_chunkvector v ON v.version_id = d.published_version_id"


def scope_size(cursor: Any, documents: Documents, cap: int) -> tuple[int, bool]:
    """The scope's entries, summed over its documents' published versions (their counts are set
    by the publish): a read of its documents, not of its vectors. At most ``cap`` documents are
    read (each holds an entry or more). The flag says a version was published before the
    counts were kept, so the sum is short."""
    cursor.execute(
        "SELECT coalesce(sum(s.entries), 0), count(*) FILTER (WHERE s.entries IS NULL) FROM ("
        "SELECT p.entries FROM documents_document d JOIN documents_documentversion p "
        f"ON p.id = d.published_version_id WHERE {documents[0]} LIMIT %s) s",
        [*documents[1], cap],
    )
    size, uncounted = cursor.fetchone()
    return int(size), bool(uncounted)


def vectors_in(cursor: Any, documents: Documents, cap: int) -> int:
    """The scope's vectors, counted up to ``cap`` on the narrow version index (another
    embedder's rows during a re-index count too, which only errs towards the larger size)."""
    cursor.execute(
        f"SELECT count(*) FROM (SELECT 1 {PUBLISHED} WHERE {documents[0]} LIMIT %s) s",
        [*documents[1], cap],
    )
    return int(cursor.fetchone()[0])


def nearest(
    cursor: Any,
    documents: Documents,
    embedder: str,
    query: str,
    full: str,
    entries: tuple[str, str, list[Any]],
    limit: int,
    rerank: int,
) -> list[Any]:
    """(entry id, full-precision distance) of the ``limit`` nearest in scope: every code of the
    scope compared with the query's, the ``rerank`` nearest ordered again by ``full`` (the
    caller's distance expression over ``v``), each checked against ``entries`` (the join and
    the WHERE over entry ``e`` with its parameters, as the other plans use them)."""
    join, where, params = entries
    # Reading and comparing every code of the scope is CPU work that splits across cores: let
    # the planner share it with a parallel worker (PostgreSQL's default cost of starting one is
    # set for far longer queries), each keeping its own nearest, merged in order. One beside the
    # leader: a hybrid search ranks its full text at the same time (one worker was the faster on
    # 2 cores: bench/README.md, "Search at scale").
    cursor.execute(
        "SELECT set_config('parallel_setup_cost', '10', true), "
        "set_config('parallel_tuple_cost', '0.001', true), "
        "set_config('min_parallel_table_scan_size', '0', true), "
        "set_config('max_parallel_workers_per_gather', '1', true)"
    )
    cursor.execute(
        f"WITH near AS MATERIALIZED (SELECT v.version_id, v.ordinal {PUBLISHED} AND v.embedder = %s "
        f"WHERE {documents[0]} ORDER BY v.{BITS} <~> binary_quantize(%s::vector) LIMIT %s) "
        f"SELECT e.id, {full} AS dist FROM near n JOIN documents_chunkvector v "
        "ON v.version_id = n.version_id AND v.ordinal = n.ordinal AND v.embedder = %s "
        f"JOIN documents_indexentry e ON e.version_id = n.version_id AND e.ordinal = n.ordinal {join} "
        f"WHERE {where} ORDER BY dist LIMIT %s",
        [embedder, *documents[1], query, rerank, query, embedder, *params, limit],
    )
    return list(cursor.fetchall())
