"""Dense ranking inside PostgreSQL with pgvector: HNSW (cosine), filters in the same query.

When the server offers the ``vector`` extension, the search schema (``schema.ensure``) creates it
and adds ``ChunkVector.embedding vector`` (no fixed dimension: each embedder has its own). The
embedding stage then writes the vector there, and only there (``ChunkVector.vector`` stays empty:
one copy). Each embedder gets a partial expression index,
``hnsw ((embedding::vector(D)) vector_cosine_ops) WHERE embedder = '<name>'``, created the first
time a worker embeds with it; queries repeat that expression so the planner can use it.

The query runs with ``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8): when the tenant,
published-version, document or attribute conditions reject the first neighbours the index
returns, the scan continues instead of returning fewer than ``k`` rows. Relaxed order may
return rows slightly out of distance order, so they are sorted again here (at most ``limit``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import transaction

COLUMN = "embedding"
_ENABLED: dict[tuple[Any, ...], bool] = {}
_INDEXED: set[tuple[Any, ...]] = set()
EF_SEARCH = 100


def _key(connection: Any) -> tuple[Any, ...]:
    s = connection.settings_dict
    return (s.get("HOST"), s.get("PORT"), s.get("NAME"))


def enabled(connection: Any) -> bool:
    """Whether ``connection``'s database ranks vectors with pgvector (its schema has the column)."""
    if connection.vendor != "postgresql":
        return False
    key = _key(connection)
    if key not in _ENABLED:
        with connection.cursor() as cursor:
            # The catalogue itself, not information_schema's view over it (about 10 ms a call).
            cursor.execute(
                "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('documents_chunkvector') "
                "AND attname = %s AND NOT attisdropped",
                [COLUMN],
            )
            found = cursor.fetchone() is not None
        if not found:
            return False  # not cached: a migration may add it later in this process
        _ENABLED[key] = True
    return _ENABLED[key]


def ensure_schema(connection: Any) -> None:
    """Create the extension and the column when the server offers pgvector (idempotent)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor.execute(f"ALTER TABLE documents_chunkvector ADD COLUMN IF NOT EXISTS {COLUMN} vector")


def literal(vector: npt.NDArray[np.float32]) -> str:
    """pgvector's text form of ``vector``."""
    return "[" + ",".join(map(repr, vector.tolist())) + "]"  # tolist: Python floats, as float(x)


def index_name(embedder: str) -> str:
    return "documents_chunkvector_hnsw_" + hashlib.sha256(embedder.encode()).hexdigest()[:12]


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
                    cursor.execute(
                        f"CREATE INDEX IF NOT EXISTS {name} ON documents_chunkvector USING hnsw "
                        f"(({COLUMN}::vector({int(dimension)})) vector_cosine_ops) "
                        f"WHERE embedder = %s",
                        [embedder],
                    )
            except Exception:
                cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [name])
                if cursor.fetchone() is None:
                    raise
    _INDEXED.add(key)


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
EXACT_BELOW = 1000


def nearest(
    connection: Any,
    join: str,
    where: str,
    params: list[Any],
    embedder: str,
    vector: npt.NDArray[np.float32],
    limit: int,
) -> list[tuple[int, float]]:
    """The ``limit`` entries nearest to ``vector`` among ``where``, as (id, cosine similarity).

    Two plans, chosen by the scope's size (counted up to ``EXACT_BELOW``):

    - small scope: exact, the scope's rows first (filters, tenant, visibility), then distances;
    - otherwise: the HNSW index drives (``ORDER BY distance LIMIT`` over the vectors alone) and
      each candidate is checked against the scope by a correlated subquery, which PostgreSQL keeps
      as a per-row filter instead of turning it into a join that would bypass the index. The
      iterative scan continues past rejected candidates; if it still ends short of ``limit``
      (its ``hnsw.max_scan_tuples`` bound, a very selective filter), the exact plan answers.
    """
    dimension = int(vector.shape[0])
    distance = f"(v.{COLUMN}::vector({dimension})) <=> %s::vector({dimension})"
    query = literal(vector)
    entries = f"FROM documents_indexentry e {join} WHERE {where}"
    exact = (
        f"SELECT e.id, {distance} AS dist FROM documents_chunkvector v "
        f"JOIN documents_indexentry e ON e.version_id = v.version_id AND e.ordinal = v.ordinal {join} "
        f"WHERE v.embedder = %s AND {where} ORDER BY dist LIMIT %s"
    )
    entry = f"(SELECT e.id {entries} AND e.version_id = v.version_id AND e.ordinal = v.ordinal)"
    indexed = (
        f"SELECT {entry} AS eid, {distance} AS dist FROM documents_chunkvector v "
        f"WHERE v.embedder = %s AND {entry} IS NOT NULL ORDER BY {distance} LIMIT %s"
    )
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM (SELECT 1 {entries} LIMIT %s) s", [*params, EXACT_BELOW])
        rows: list[Any] = []
        if cursor.fetchone()[0] >= EXACT_BELOW:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cursor.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, 4 * int(limit))}")
            cursor.execute(indexed, [*params, query, embedder, *params, query, limit])
            rows = cursor.fetchall()
        if len(rows) < limit:
            cursor.execute(exact, [query, embedder, *params, limit])
            rows = cursor.fetchall()
    # A zero vector (a chunk with nothing to embed) has no cosine: NaN, which is no neighbour.
    found = [(int(i), 1.0 - float(d)) for i, d in rows if d is not None and not math.isnan(float(d))]
    return sorted(found, key=lambda r: -r[1])
