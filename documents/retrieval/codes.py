# long-module: both kinds of code (pgvector's and the sign codes without it) with their schema, the
# expression each generated column computes (centred or not) and the ranking that reads them:
# one rule, kept beside the SQL that must compute it the same way.
"""Binary codes of the vectors: a scope ranked by every one of its vectors, inside PostgreSQL.

Two kinds of code, one per PostgreSQL backend of the index (SQLite ranks exactly, with no codes):

- Without pgvector (:func:`nearest_by_sign`): each ``ChunkVector.vector`` (float32 bytes) gets
  its signs as a generated ``varbit`` column, ``SIGN_BITS``: two bits a dimension, (x > 0, x < 0),
  so a zero (+0.0 or -0.0) is 00 (96 bytes at 384). Their Hamming distance counts 0 for two
  components of one sign, 1 where one of them is zero and 2 for opposite signs: for dense
  vectors it orders as one sign bit a dimension would (every bit doubled), and for sparse ones
  (most components zero, as the hashing embedder's) a zero no longer looks like a positive. The
  codes are computed by PostgreSQL itself from the bytes with built-in string functions, so they
  are written with every new vector (the embedding stage, dedup's copies, ``COPY``) and filled
  for existing rows by the migration that adds the column; they are never out of step. A model
  whose vectors all lean one way has the signs of (x - c) instead, c its centre (``centres``;
  ``CENTRED_SIGNS``), and its queries are coded the same way (``asked``). A B-tree
  holds them per version. A search reads every code of its scope from that index (the scope's
  conditions in the same query), takes the ``SIGN_RERANK`` nearest by Hamming distance
  (``bit_count(a # b)``, PostgreSQL 14+), and orders those few hundred again by their full
  vectors: only they leave the database. Cost grows with the scope, linearly: past
  ``SIGN_SCOPE_LIMIT`` entries pgvector is the better tool (``documents.checks`` and the admin's
  health page say so; docs/deployment.md has the measured figures).
- With pgvector: each vector's sign bits (pgvector's ``binary_quantize``: 1 bit a dimension,
  48 bytes at 384; of the vector minus its model's centre where it has one, ``quantised_sql``)
  are kept by PostgreSQL itself as a generated column beside the vector, so
  they are never out of step with it, and a B-tree holds them per version, so a scope's codes
  are read from the index alone, not from the table. ``documents.retrieval.pgvector.nearest``
  ranks a selective filter's scope this way (Hamming distance over all of them, then the nearest
  few hundred by their full vectors) instead of walking a graph over every vector of the
  embedder past them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from documents.retrieval import centres

BITS = "embedding_bits"
BITS_INDEX = "documents_chunkvector_bits"
# The scope's condition over its documents ``d`` (SQL, parameters).
Documents = tuple[str, list[Any]]


def quantised_sql(column: str) -> str:
    """The codes' expression over ``column``: its signs, of the vector minus its model's centre
    for a model that has one (``centres``)."""

    def centred(values: tuple[float, ...]) -> str:
        return f"{column} - '{_floats(values)}'::vector"

    return f"binary_quantize({_by_model(centred, column)})"


def ensure_schema(cursor: Any, column: str) -> None:
    """The codes of ``column`` and their index (idempotent). The column's comment names its
    expression: codes made by another (a centre added or changed since) are dropped and made
    again, which rewrites the table once and computes every row's code anew."""
    expression = quantised_sql(column)
    stamp = "codes " + hashlib.sha256(expression.encode()).hexdigest()[:16]
    cursor.execute(
        "SELECT col_description('documents_chunkvector'::regclass, attnum) FROM pg_attribute "
        "WHERE attrelid = 'documents_chunkvector'::regclass AND attname = %s AND NOT attisdropped",
        [BITS],
    )
    found = cursor.fetchone()
    if found is None or found[0] != stamp:
        if found is not None:
            cursor.execute(f"DROP INDEX IF EXISTS {BITS_INDEX}")
            cursor.execute(f"ALTER TABLE documents_chunkvector DROP COLUMN {BITS}")
        cursor.execute(
            f"ALTER TABLE documents_chunkvector ADD COLUMN {BITS} varbit "
            f"GENERATED ALWAYS AS ({expression}) STORED"
        )
        cursor.execute(f"COMMENT ON COLUMN documents_chunkvector.{BITS} IS '{stamp}'")
    cursor.execute(
        f"CREATE INDEX IF NOT EXISTS {BITS_INDEX} ON documents_chunkvector "
        f"(version_id, embedder) INCLUDE (ordinal, {BITS})"
    )


def asked(vector: npt.NDArray[np.float32], embedder: str) -> npt.NDArray[np.float32]:
    """The vector whose signs are compared with ``embedder``'s stored codes: ``vector`` minus the
    model's centre, in float32 as the database subtracts it (``quantised_sql``)."""
    centre = centres.centre(embedder)
    return vector if centre is None else np.asarray(vector, dtype=np.float32) - centre


def _floats(values: tuple[float, ...]) -> str:
    """pgvector's text form of the centre as the query side holds it (float32, exactly)."""
    return "[" + ",".join(map(repr, np.asarray(values, dtype=np.float32).tolist())) + "]"


def _by_model(centred: Callable[[tuple[float, ...]], str], plain: str) -> str:
    """A code's expression: ``centred(centre)`` for the rows of each model with a centre,
    ``plain`` for every other row (``plain`` alone when no model has one)."""
    branches = "".join(
        f"WHEN embedder = {_literal(name)} THEN {centred(values)} "
        for name, values in sorted(centres.CENTRES.items())
    )
    return f"CASE {branches}ELSE {plain} END" if branches else plain


def _literal(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._:-]+", name):
        raise ValueError(f"not an embedder name: {name!r}")
    return f"'{name}'"


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
    coded: str,
    full: str,
    entries: tuple[str, str, list[Any]],
    limit: int,
    rerank: int,
) -> list[Any]:
    """(entry id, full-precision distance) of the ``limit`` nearest in scope: every code of the
    scope compared with the code of ``coded`` (the query as ``asked`` of the model, in pgvector's
    text form), the ``rerank`` nearest ordered again by ``full`` (the caller's distance
    expression over ``v`` and ``query``), each checked against ``entries`` (the join and
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
        [embedder, *documents[1], coded, rerank, query, embedder, *params, limit],
    )
    return list(cursor.fetchall())


# --- PostgreSQL without pgvector: two sign bits a dimension of the vector bytes --------------------

SIGN_BITS = "vector_bits"
SIGN_BITS_INDEX = "documents_chunkvector_vector_bits"
# Immutable built-ins only (a generated column's expression), each done in C over the whole
# value: no loop per dimension. In the bytes' hex form each little-endian float32 is 8
# characters; its sign bit is the high bit of the 4th byte (the 7th character is 8-f when set)
# and it is zero when every other bit is clear ('00000000' is +0.0, '00000080' is -0.0). A comma
# after each float keeps the next passes aligned on whole floats: the zeros become 'z', every
# other float its 7th character, mapped to 'p' (0-7) or 'n' (8-f), then z, p, n to 00, 10, 01.
SIGN_BITS_SQL = (
    "replace(replace(replace(translate(regexp_replace(regexp_replace(regexp_replace("
    "encode(vector, 'hex'), '.{8}', '\\&,', 'g'), '000000[08]0,', 'z', 'g'), "
    "'......(.).,', '\\1', 'g'), '0123456789abcdef', 'ppppppppnnnnnnnn'), "
    "'z', '00'), 'p', '10'), 'n', '01')::varbit"
)
# The codes of a model with a centre (``centres``): the same two bits a dimension, of (x - c)
# for the centre's component c, decided without decoding the floats. Read as an integer, a
# float32's bits order positive floats as their values and negative ones in reverse, so the key
# (bits below 2^31: themselves; above: 2^31 minus them) orders every finite float as its value,
# both zeros at 0; a component above its centre's key is 10, below it 01, equal 00. A function
# (immutable, a generated column may call it) because it reads the bytes dimension by dimension:
# about 0.3 ms a vector, against the 10-30 ms the model took to make it; the plain codes of every
# other model are not slowed.
CENTRED_SIGNS = "documents_centred_signs"
CENTRED_SIGNS_FUNCTION = (
    f"CREATE OR REPLACE FUNCTION {CENTRED_SIGNS}(v bytea, centre int8[]) RETURNS varbit "
    "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ "
    "SELECT coalesce(string_agg(CASE WHEN k > centre[i + 1] THEN '10' WHEN k < centre[i + 1] THEN '01' "
    "ELSE '00' END, '' ORDER BY i), '')::varbit FROM ("
    "SELECT i, CASE WHEN b >= 2147483648 THEN 2147483648 - b ELSE b END AS k FROM ("
    "SELECT i, get_byte(v, 4 * i)::int8 | (get_byte(v, 4 * i + 1)::int8 << 8) "
    "| (get_byte(v, 4 * i + 2)::int8 << 16) | (get_byte(v, 4 * i + 3)::int8 << 24) AS b "
    "FROM generate_series(0, length(v) / 4 - 1) i) r) s $$"
)


def float_keys(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
    """Each component's key, as ``CENTRED_SIGNS`` reads it from the bytes."""
    bits = np.ascontiguousarray(vector, dtype="<f4").view("<u4").astype(np.int64)
    return np.where(bits >= 2**31, 2**31 - bits, bits)


def sign_bits_sql() -> str:
    """The codes' expression: ``SIGN_BITS_SQL``, or ``CENTRED_SIGNS`` for a model with a centre."""

    def centred(values: tuple[float, ...]) -> str:
        keys = ",".join(map(str, float_keys(np.asarray(values, dtype=np.float32)).tolist()))
        return f"{CENTRED_SIGNS}(vector, '{{{keys}}}'::int8[])"

    return _by_model(centred, SIGN_BITS_SQL)


# The first codes (migration 0007): one sign bit a dimension, a zero as a positive. Kept for the
# migrations that add them and restore them.
SIGN_BIT_SQL = (
    "translate(regexp_replace(encode(vector, 'hex'), '......(.).', '\\1', 'g'), "
    "'0123456789abcdef', '0000000011111111')::varbit"
)
# Codes ordered again by their full vectors: at least this many, or this many times the wanted
# rows (on the benchmark's synthetic 384-d vectors, see bench/README.md).
SIGN_RERANK = 400
SIGN_RERANK_FACTOR = 8
# The largest scope (entries in one search) this ranks within its documented latency
# (docs/deployment.md, "PostgreSQL without pgvector"); larger scopes are still ranked in full,
# more slowly (linear in the scope), and the checks recommend pgvector.
SIGN_SCOPE_LIMIT = 100_000


def add_sign_bits(connection: Any, expression: str | None = None) -> None:
    """The sign codes of ``ChunkVector.vector`` and their index (PostgreSQL; idempotent). Adding
    the generated column rewrites the table once, computing every existing row's code.
    ``expression``: the code's SQL, today's (``sign_bits_sql``) if None (a migration restoring
    older codes passes theirs)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(CENTRED_SIGNS_FUNCTION)
        cursor.execute(
            f"ALTER TABLE documents_chunkvector ADD COLUMN IF NOT EXISTS {SIGN_BITS} varbit "
            f"GENERATED ALWAYS AS ({expression or sign_bits_sql()}) STORED"
        )
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {SIGN_BITS_INDEX} ON documents_chunkvector "
            f"(version_id, embedder) INCLUDE (ordinal, {SIGN_BITS})"
        )


def drop_sign_bits(connection: Any) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {SIGN_BITS_INDEX}")
        cursor.execute(f"ALTER TABLE documents_chunkvector DROP COLUMN IF EXISTS {SIGN_BITS}")
        cursor.execute(f"DROP FUNCTION IF EXISTS {CENTRED_SIGNS}(bytea, int8[])")


def sign_bits(vector: npt.NDArray[np.float32], centre: npt.NDArray[np.float32] | None = None) -> str:
    """The code the database computes for ``vector``, as ``varbit`` text ('1001...'): for each
    component (x > 0, x < 0), read from its bits as the SQL reads them (either zero is 00); with
    a ``centre``, (x > c, x < c) as ``CENTRED_SIGNS`` decides them."""
    if centre is not None:
        keys, against = float_keys(vector), float_keys(centre)
        bits = np.stack([keys > against, keys < against], axis=1).astype(np.uint8)
        return (bits.ravel() + ord("0")).tobytes().decode("ascii")
    raw = np.ascontiguousarray(vector, dtype="<f4").view("<u4")
    nonzero = (raw & np.uint32(0x7FFFFFFF)) != 0
    negative = (raw >> np.uint32(31)).astype(bool)
    bits = np.stack([nonzero & ~negative, nonzero & negative], axis=1).astype(np.uint8)
    return (bits.ravel() + ord("0")).tobytes().decode("ascii")


def nearest_by_sign(
    cursor: Any,
    source: tuple[str, list[Any]],
    embedder: str,
    vector: npt.NDArray[np.float32],
    entries: tuple[str, str, list[Any]],
    limit: int,
) -> list[tuple[int, float]]:
    """(entry id, cosine similarity) of the ``limit`` entries nearest to ``vector``, best first.

    ``source`` is the FROM and WHERE that yield the scope's vectors ``v`` (its documents' published
    versions, or the probe's one version) with their parameters; ``entries`` is the join and the
    WHERE over entry ``e`` and its document ``d`` (``backends.scope_sql``), applied in the same
    query to the shortlisted rows. Every code in ``source`` is compared in the database; only the
    shortlist's vectors are read, and ordered here by their exact similarity."""
    rerank = max(SIGN_RERANK, SIGN_RERANK_FACTOR * int(limit))
    dimension = int(vector.shape[0])
    join, where, params = entries
    # Comparing every code is CPU work that splits across cores: as in ``nearest`` below, one
    # parallel worker beside the leader when the planner finds the scope large enough.
    cursor.execute(
        "SELECT set_config('parallel_setup_cost', '10', true), "
        "set_config('parallel_tuple_cost', '0.001', true), "
        "set_config('max_parallel_workers_per_gather', '1', true)"
    )
    # bit_length: a code of another length (a vector of another dimension) cannot be XORed.
    # Two bits a dimension.
    cursor.execute(
        f"WITH near AS MATERIALIZED (SELECT v.version_id, v.ordinal {source[0]} AND v.embedder = %s "
        f"AND bit_length(v.{SIGN_BITS}) = %s ORDER BY bit_count(v.{SIGN_BITS} # %s::varbit) LIMIT %s) "
        "SELECT e.id, v.vector FROM near n JOIN documents_chunkvector v "
        "ON v.version_id = n.version_id AND v.ordinal = n.ordinal AND v.embedder = %s "
        f"JOIN documents_indexentry e ON e.version_id = n.version_id AND e.ordinal = n.ordinal {join} "
        f"WHERE {where}",
        [
            *source[1],
            embedder,
            2 * dimension,
            sign_bits(vector, centres.centre(embedder)),
            rerank,
            embedder,
            *params,
        ],
    )
    rows = cursor.fetchall()
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = matrix @ vector
    order = np.argsort(-scores, kind="stable")[: int(limit)]
    return [(int(rows[i][0]), float(scores[i])) for i in order]
