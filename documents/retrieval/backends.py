"""The two rankings, each one SQL query with every scope condition inside it.

A :class:`Scope` says which entries may be hits: one tenant, the published version of each
document (or, for the indexing stage's probe, one given version), optionally some documents and
extra WHERE fragments over the document row (attribute filters, alias ``d``). Both rankings put
all of it in the same query as the ranking itself, so ``k`` is never lost to a filter applied
afterwards, and neither reads more than its candidates' ids and scores into Python.

- Lexical: SQLite FTS5 ``bm25()``; PostgreSQL ``ts_rank_cd`` over the GIN-indexed ``tsvector``
  (length-normalised), both capped at ``LEXICAL_CANDIDATES`` rows: a common word must not make
  every chunk a candidate to be ranked in Python.
- Dense: SQLite computes the distance in the query with sqlite-vec (exact, in C, over the
  scope's rows only). PostgreSQL with pgvector: see ``documents.retrieval.pgvector``. PostgreSQL
  without pgvector: the lexical candidates (up to ``FALLBACK_CANDIDATES``) re-ranked by their
  vectors, fetched by id; a tenant's vectors are never all read.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import connection

from documents.retrieval import pgvector
from documents.retrieval.schema import FTS, TSV
from documents.retrieval.text import fts5_query, tsquery

LEXICAL_CANDIDATES = 200
FALLBACK_CANDIDATES = 1000

Ranked = list[tuple[int, float]]  # (index entry id, component score), best first


@dataclass(frozen=True)
class Scope:
    tenant_id: int
    embedder: str
    version_id: uuid.UUID | None = None
    document_ids: Sequence[uuid.UUID] | None = None
    where: Sequence[tuple[str, Sequence[Any]]] = field(default_factory=tuple)


def _uuid(value: uuid.UUID) -> Any:
    # As the backend stores UUIDs (char(32) on SQLite, uuid on PostgreSQL).
    from documents.models import Document

    return Document._meta.pk.get_db_prep_value(value, connection)


JOIN_DOCUMENT = "JOIN documents_document d ON d.id = e.document_id"


def _scope_sql(scope: Scope) -> tuple[str, list[Any]]:
    """The scope's conditions over entry ``e`` and its document ``d`` (joined by ``JOIN_DOCUMENT``)."""
    sql = "e.tenant_id = %s"
    params: list[Any] = [scope.tenant_id]
    if scope.version_id is not None:
        sql += " AND e.version_id = %s"
        params.append(_uuid(scope.version_id))
    else:
        # Visibility is the publish commit: only the version the document points at is a hit.
        sql += " AND e.version_id = d.published_version_id"
    if scope.document_ids is not None:
        ids = list(scope.document_ids) or [uuid.UUID(int=0)]
        sql += f" AND e.document_id IN ({', '.join(['%s'] * len(ids))})"
        params.extend(_uuid(i) for i in ids)
    for fragment, fragment_params in scope.where:
        sql += f" AND ({fragment})"
        params.extend(fragment_params)
    return sql, params


def lexical(scope: Scope, tokens: list[str], limit: int = LEXICAL_CANDIDATES) -> Ranked:
    """Entries matching any token, best BM25-class score first (score: higher is better)."""
    if not tokens or limit <= 0:
        return []
    where, params = _scope_sql(scope)
    if connection.vendor == "sqlite":
        sql = (
            f"SELECT e.id, bm25({FTS}) AS s FROM {FTS} JOIN documents_indexentry e ON e.id = {FTS}.rowid "
            f"{JOIN_DOCUMENT} WHERE {where} AND {FTS} MATCH %s ORDER BY s, e.id LIMIT %s"
        )
        rows = _fetch(sql, [*params, fts5_query(tokens), limit])
        return [(int(i), -float(s)) for i, s in rows]  # bm25() is negative: lower is better
    # 1 | 32: rank divided by 1 + log(length), then scaled to 0-1 (rank / (rank + 1)).
    sql = (
        f"SELECT e.id, ts_rank_cd(e.{TSV}, q, 33) AS s FROM documents_indexentry e "
        f"{JOIN_DOCUMENT} CROSS JOIN to_tsquery('simple', %s) q "
        f"WHERE {where} AND e.{TSV} @@ q ORDER BY s DESC, e.id LIMIT %s"
    )
    rows = _fetch(sql, [tsquery(tokens), *params, limit])
    return [(int(i), float(s)) for i, s in rows]


def dense(scope: Scope, vector: npt.NDArray[np.float32], limit: int, *, tokens: list[str]) -> Ranked:
    """Entries nearest to ``vector`` by cosine similarity (score: the similarity), best first.

    ``tokens`` feed the PostgreSQL fallback without pgvector, whose candidates are lexical.
    """
    if limit <= 0 or not vector.any():
        return []
    vector = np.ascontiguousarray(vector, dtype=np.float32)
    if connection.vendor == "sqlite":
        where, params = _scope_sql(scope)
        # Unit vectors: squared L2 distance = 2 - 2 cos; a zero (empty) chunk comes out at 0.
        sql = (
            "SELECT e.id, vec_distance_l2(v.vector, %s) AS dist FROM documents_indexentry e "
            "JOIN documents_chunkvector v ON v.version_id = e.version_id AND v.ordinal = e.ordinal "
            f"{JOIN_DOCUMENT} WHERE {where} AND v.embedder = %s ORDER BY dist, e.id LIMIT %s"
        )
        rows = _fetch(sql, [vector.tobytes(), *params, scope.embedder, limit])
        return [(int(i), 1.0 - float(d) ** 2 / 2.0) for i, d in rows]
    if pgvector.enabled(connection):
        where, params = _scope_sql(scope)
        return pgvector.nearest(connection, where, params, scope.embedder, vector, limit)
    return rerank_by_vectors(scope, vector, lexical(scope, tokens, FALLBACK_CANDIDATES), limit)


def rerank_by_vectors(
    scope: Scope, vector: npt.NDArray[np.float32], candidates: Ranked, limit: int
) -> Ranked:
    """The PostgreSQL fallback without pgvector: ``candidates`` ordered by cosine similarity,
    reading only their vectors."""
    if not candidates:
        return []
    ids = [i for i, _ in candidates]
    sql = (
        "SELECT e.id, v.vector FROM documents_indexentry e JOIN documents_chunkvector v "
        "ON v.version_id = e.version_id AND v.ordinal = e.ordinal WHERE e.id = ANY(%s) AND v.embedder = %s"
    )
    rows = _fetch(sql, [ids, scope.embedder])
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = matrix @ vector
    order = np.argsort(-scores, kind="stable")[:limit]
    return [(int(rows[i][0]), float(scores[i])) for i in order]


def _fetch(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
