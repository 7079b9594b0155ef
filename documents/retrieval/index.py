"""The search index seam: the one place that writes, copies, ranks and builds the index.

Three implementations, chosen per connection by :func:`search_index`:

- :class:`SQLiteIndex`: FTS5 for words, ranked by BM25 on the tenant's own counts
  (``documents.retrieval.sqlite_fts``), sqlite-vec's exact distances for meaning;
- :class:`PostgresIndex`: PostgreSQL full text (``tsvector``, ranked by the same BM25 as
  SQLite's); without the ``vector`` extension meaning ranks every vector of the scope by its binary
  code (two sign bits a dimension, Hamming distance) in the database, then the nearest by their
  full vectors (``documents.retrieval.codes``);
- :class:`PgvectorIndex`: the same full text, and meaning through pgvector (an HNSW graph per
  embedder, binary codes for selective scopes; ``documents.retrieval.pgvector``).

Everything else (the embedding stage, dedup, re-index, search, ``manage.py search_index``)
calls these methods and never holds vector or full-text SQL of its own (``tests/test_layout.py``
fails otherwise). A new backend is one more class here; a condition every query must carry (a
scope) is added once, in :class:`~documents.retrieval.backends.Scope` and its SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from django.db import connection, transaction

from documents.retrieval import backends, codes, pgvector, sqlite_fts
from documents.retrieval.backends import JOIN_DOCUMENT, Ranked, Scope

VECTOR_FIELDS = ("version_id", "ordinal", "batch", "embedder", "vector")
Vectors = npt.NDArray[np.float32]  # one unit vector per row


class SearchIndex(Protocol):
    """What every backend of the index does."""

    # The largest scope (entries one search ranks by meaning) this backend serves within its
    # documented latency (docs/deployment.md); None: no limit of its own short of the machine.
    scope_limit: int | None

    def prepare(self, embedder: str, dimension: int) -> None:
        """Make the structures ``embedder``'s vectors need (outside any fenced write)."""

    def write_vectors(
        self, version_id: Any, batch: int, embedder: str, ordinals: Sequence[int], vectors: Vectors
    ) -> None:
        """Store the vectors of a version's chunks ``ordinals`` (rows already there are kept)."""

    def copy_vectors(self, source_id: Any, version_id: Any, embedder: str) -> int:
        """Copy the source version's vectors of ``embedder`` to the version; how many."""

    def lexical(self, scope: Scope, tokens: list[str], limit: int) -> Ranked:
        """Entries matching any token, best BM25-class score first."""

    def dense(self, scope: Scope, vector: Vectors, limit: int, *, tokens: list[str]) -> Ranked:
        """Entries nearest to ``vector`` by cosine similarity (score: the similarity)."""

    def build(self) -> list[str]:
        """Build missing indexes without blocking writes; a line per thing done."""


def _vector_rows(
    version_id: Any, batch: int, embedder: str, ordinals: Sequence[int], vectors: Vectors
) -> list[tuple[object, ...]]:
    return [(version_id, o, batch, embedder, v.tobytes()) for o, v in zip(ordinals, vectors, strict=True)]


def _copy_rows(source_id: Any, version_id: Any, embedder: str) -> int:
    """The ORM copy of a version's vector rows (the vector bytes included where they are kept)."""
    from documents.models import ChunkVector

    fields = ("ordinal", "batch", "embedder", "vector")
    rows = [
        ChunkVector(version_id=version_id, **dict(zip(fields, values, strict=True)))
        for values in ChunkVector.objects.filter(version_id=source_id, embedder=embedder)
        .order_by("ordinal")
        .values_list(*fields)
    ]
    ChunkVector.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    return len(rows)


def _insert_vectors(rows: Sequence[Sequence[object]], **options: Any) -> None:
    from documents.bulk_insert import insert_rows
    from documents.models import ChunkVector

    insert_rows(ChunkVector, VECTOR_FIELDS, rows, **options)


class _VectorsInRows:
    """Vectors kept as bytes in ``ChunkVector.vector`` and ranked exactly: nothing to prepare
    per embedder, and a copy is a copy of the rows."""

    def prepare(self, embedder: str, dimension: int) -> None:
        return None

    def write_vectors(
        self, version_id: Any, batch: int, embedder: str, ordinals: Sequence[int], vectors: Vectors
    ) -> None:
        if len(ordinals):
            _insert_vectors(_vector_rows(version_id, batch, embedder, ordinals, vectors), skip_existing=True)

    def copy_vectors(self, source_id: Any, version_id: Any, embedder: str) -> int:
        return _copy_rows(source_id, version_id, embedder)


class SQLiteIndex(_VectorsInRows):
    """FTS5 with per-tenant terms (``documents.retrieval.sqlite_fts``) and sqlite-vec (loaded
    into every connection by ``documents.retrieval.sqlite_vec``)."""

    scope_limit: int | None = None

    def lexical(self, scope: Scope, tokens: list[str], limit: int) -> Ranked:
        if not tokens or limit <= 0:
            return []
        return sqlite_fts.lexical(scope, tokens, limit)

    def dense(self, scope: Scope, vector: Vectors, limit: int, *, tokens: list[str]) -> Ranked:
        if limit <= 0 or not vector.any():
            return []
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        # "+e.tenant_id": not by the entries' tenant index (the documents' one leads, see below).
        where, params = backends.scope_sql(scope, tenant="+e.tenant_id")
        documents = backends.documents_sql(scope)
        if documents is not None:
            # The scope's documents first, then their published versions' vectors alone (by the
            # vectors' (version, ordinal) index), the nearest ``limit`` found before any entry is
            # read: then only those few entries, checked against the whole scope. Joining every
            # vector with its entry first read an entry per vector (50,000 for half of a 100k
            # tenant) to keep ``limit`` of them (bench/README.md, "Search with access lists").
            sql = (
                "WITH near AS MATERIALIZED (SELECT v.version_id, v.ordinal, "
                "vec_distance_l2(v.vector, %s) AS dist FROM documents_document d "
                "CROSS JOIN documents_chunkvector v ON v.version_id = d.published_version_id "
                f"WHERE {documents[0]} AND v.embedder = %s ORDER BY dist LIMIT %s) "
                "SELECT e.id, n.dist, (SELECT count(*) FROM near) FROM near n "
                "CROSS JOIN documents_indexentry e ON e.version_id = n.version_id AND e.ordinal = n.ordinal "
                f"{backends.JOIN_DOCUMENT} WHERE {where} ORDER BY n.dist, e.id LIMIT %s"
            )
            rows = backends.fetch(
                sql, [vector.tobytes(), *documents[1], scope.embedder, limit, *params, limit]
            )
            # Every published vector has its entry (both are written by the indexing of one
            # version); should one not, the plan below, entry by entry, answers.
            if rows and len(rows) == rows[0][2]:
                return [(int(i), 1.0 - float(d) ** 2 / 2.0) for i, d, _ in rows]
        # Unit vectors: squared L2 distance = 2 - 2 cos; a zero (empty) chunk comes out at 0.
        # CROSS JOIN fixes SQLite's join order: the tenant's documents first (where attribute
        # filters reject whole documents), then their published version's entries and vectors,
        # so only the vectors in scope are read and compared.
        sql = (
            "SELECT e.id, vec_distance_l2(v.vector, %s) AS dist FROM documents_document d "
            "CROSS JOIN documents_indexentry e ON e.document_id = d.id "
            "CROSS JOIN documents_chunkvector v ON v.version_id = e.version_id AND v.ordinal = e.ordinal "
            f"WHERE d.tenant_id = %s AND {where} AND v.embedder = %s ORDER BY dist, e.id LIMIT %s"
        )
        rows = backends.fetch(sql, [vector.tobytes(), scope.tenant_id, *params, scope.embedder, limit])
        return [(int(i), 1.0 - float(d) ** 2 / 2.0) for i, d in rows]

    def build(self) -> list[str]:
        return ["Nothing to build: SQLite ranks vectors exactly, with no index to build."]


class PostgresIndex(_VectorsInRows):
    """PostgreSQL without the ``vector`` extension (e.g. Debian's own server): the vector as
    bytes in its row, with its sign code beside it (a generated column, ``codes.SIGN_BITS``)."""

    scope_limit: int | None = codes.SIGN_SCOPE_LIMIT

    def lexical(self, scope: Scope, tokens: list[str], limit: int) -> Ranked:
        if not tokens or limit <= 0:
            return []
        return backends.postgres_lexical(scope, tokens, limit)

    def dense(self, scope: Scope, vector: Vectors, limit: int, *, tokens: list[str]) -> Ranked:
        """Every vector of the scope ranked by its sign code in the database, the nearest few
        hundred by their full vectors (``codes.nearest_by_sign``): meaning is found whether or not
        the query shares a word with it, and no more than the shortlist leaves the database."""
        if limit <= 0 or not vector.any():
            return []
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        where, params = backends.scope_sql(scope)
        documents = backends.documents_sql(scope)
        if scope.version_id is not None:  # the indexing stage's probe: the one version's vectors
            version = backends.uuid_value(scope.version_id)
            source = ("FROM documents_chunkvector v WHERE v.version_id = %s", [version])
        else:
            assert documents is not None
            source = (f"{codes.PUBLISHED} WHERE {documents[0]}", documents[1])
        with transaction.atomic(), connection.cursor() as cursor:
            return codes.nearest_by_sign(
                cursor, source, scope.embedder, vector, (JOIN_DOCUMENT, where, params), limit
            )

    def build(self) -> list[str]:
        return ["Nothing to build: this database does not rank vectors with pgvector."]


class PgvectorIndex(PostgresIndex):
    """PostgreSQL with pgvector: the vector is kept once, in its own column."""

    scope_limit: int | None = None

    def prepare(self, embedder: str, dimension: int) -> None:
        pgvector.ensure_index(connection, embedder, dimension)

    def write_vectors(
        self, version_id: Any, batch: int, embedder: str, ordinals: Sequence[int], vectors: Vectors
    ) -> None:
        """In one statement; ``ChunkVector.vector`` stays empty, and a row left without the
        column's value (written before the database had pgvector) gets it."""
        if not len(ordinals):
            return
        column = pgvector.COLUMN
        pairs = zip(ordinals, vectors, strict=True)
        rows = [(version_id, o, batch, embedder, b"", pgvector.literal(v)) for o, v in pairs]
        _insert_vectors(
            rows,
            extra=[(column, "text", "{}::vector")],
            on_conflict=(
                f"ON CONFLICT (version_id, ordinal, embedder) DO UPDATE SET {column} = EXCLUDED.{column} "
                f"WHERE documents_chunkvector.{column} IS NULL"
            ),
        )

    def copy_vectors(self, source_id: Any, version_id: Any, embedder: str) -> int:
        copied = _copy_rows(source_id, version_id, embedder)
        if copied:
            # The vector lives in the pgvector column: copied in the database, never via Python.
            column = pgvector.COLUMN
            backends.execute(
                f"UPDATE documents_chunkvector c SET {column} = s.{column} FROM documents_chunkvector s "
                "WHERE c.version_id = %s AND s.version_id = %s AND s.ordinal = c.ordinal "
                f"AND s.embedder = %s AND c.embedder = s.embedder AND c.{column} IS NULL",
                [version_id, source_id, embedder],
            )
        return copied

    def dense(self, scope: Scope, vector: Vectors, limit: int, *, tokens: list[str]) -> Ranked:
        if limit <= 0 or not vector.any():
            return []
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        where, params = backends.scope_sql(scope)
        documents = backends.documents_sql(scope)
        return pgvector.nearest(
            connection, JOIN_DOCUMENT, where, params, scope.embedder, vector, limit, documents
        )

    def build(self) -> list[str]:
        done = pgvector.build_indexes(connection)
        return done or ["No vectors stored yet: the first embedding builds its index."]


def add_codes(connection: Any, expression: str | None = None) -> None:
    """The schema of the codes PostgreSQL without pgvector ranks by (a migration's step; the
    migrations pass the codes of their time, ``expression``)."""
    codes.add_sign_bits(connection, expression)


def drop_codes(connection: Any) -> None:
    codes.drop_sign_bits(connection)


def record_version(version_id: Any, search_title: str) -> None:
    """Keep what the full-text ranking reads of a version as a whole, after its entries are
    written: the words its entries' search texts open with (its title) and its length in words,
    those counted once (``backends.record_version``)."""
    backends.record_version(version_id, search_title)


def install(app: Any) -> None:
    """Keep the index working in every process (the documents app's ``ready``): sqlite-vec is
    loaded into each SQLite connection, and after every ``migrate`` the full-text index (and,
    where the server offers it, the pgvector column) is checked whole."""
    from django.db.backends.signals import connection_created
    from django.db.models.signals import post_migrate

    from documents.retrieval import schema, sqlite_vec

    connection_created.connect(sqlite_vec.on_connection_created, dispatch_uid="documents.sqlite_vec")
    post_migrate.connect(schema.on_post_migrate, sender=app, dispatch_uid="documents.lexical_index")


_SQLITE = SQLiteIndex()
_POSTGRES = PostgresIndex()
_PGVECTOR = PgvectorIndex()


def search_index() -> SearchIndex:
    """The index of the current thread's default connection."""
    if connection.vendor == "sqlite":
        return _SQLITE
    return _PGVECTOR if pgvector.enabled(connection) else _POSTGRES
