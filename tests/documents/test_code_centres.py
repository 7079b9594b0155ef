"""The codes of a model whose vectors all lean one way are taken of the vector minus its centre.

multilingual-e5's passage vectors share one large direction, so their plain signs tell them apart
badly and the shortlist the codes give (PostgreSQL without pgvector ranks every query by it;
pgvector ranks a selective scope by it) lost true neighbours. Here: the database computes the
centred code that the query is given, and a scope of vectors leaning like e5's finds its exact
nearest through the codes on every database (this file runs again on the real pgvector server,
``test_retrieval_pgvector.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.db import connection

from documents.embedders.e5 import E5Embedder
from documents.embedders.local import LocalModelEmbedder
from documents.models import Chunk, ChunkVector, DocumentVersion, IndexEntry
from documents.retrieval import backends, centres, codes, pgvector
from documents.retrieval.index import search_index
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload
from tests.documents.test_retrieval_codes import tricky_vectors

pytestmark = pytest.mark.django_db(transaction=True)

E5 = E5Embedder().name
DIMENSION = E5Embedder().dimension


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def leaning(seed: int, queries: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """3,000 unit vectors that lean as e5's do, and ``queries`` more near some of them: the
    model's centre plus 30 topics, 10 sub-topics each and 10 items each (a fifth, an eighth and a
    third of the centre's norm). Any two sit at a cosine of about 0.86 (e5's passages: 0.8 and
    more); a query is a sub-topic's with an item of its own, its 100th nearest 1.19 times as far
    as its 10th (1.27 for real vectors of documentation text: these are harder)."""
    rng = np.random.default_rng(seed)
    centre = centres.centre(E5)
    assert centre is not None
    size = float(np.linalg.norm(centre))

    def directions(*shape: int, scale: float) -> np.ndarray:
        drawn = rng.normal(size=(*shape, DIMENSION)).astype(np.float32)
        return scale * size * drawn / np.linalg.norm(drawn, axis=-1, keepdims=True)

    topics, subtopics = directions(30, scale=0.2), directions(30, 10, scale=0.12)
    stored = centre + topics[:, None, None] + subtopics[:, :, None] + directions(30, 10, 10, scale=0.35)
    t, s = rng.integers(0, 30, queries), rng.integers(0, 10, queries)
    asked = centre + topics[t] + subtopics[t, s] + directions(queries, scale=0.35)
    return tuple(
        (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
        for x in (stored.reshape(-1, DIMENSION), asked)
    )


def test_e5_has_a_centre_and_the_default_model_does_not():
    assert centres.centre(E5) is not None and centres.centre(E5).shape == (DIMENSION,)
    assert np.linalg.norm(centres.centre(E5)) > 0.8  # the mean of unit vectors: they lean far
    assert centres.centre(LocalModelEmbedder().name) is None
    assert set(centres.CENTRES) == {E5}


def test_a_centred_code_compares_each_component_with_the_centres():
    centre = np.array([0.5, -0.5, 0.0, 0.0, 0.25, -0.0], dtype=np.float32)
    vector = np.array([0.6, -0.6, -0.0, 1e-45, 0.25, 0.0], dtype=np.float32)
    # above, below, equal (both zeros), above (a denormal), equal, equal (+0 against -0)
    assert codes.sign_bits(vector, centre) == "100100100000"
    assert codes.sign_bits(vector) == "100100101000"
    assert codes.sign_bits(centre, centre) == "0" * 12
    # Comparing the bits' keys decides as the float32 difference would, for any vector.
    real = centres.centre(E5)
    rng = np.random.default_rng(2)
    for vector in [*rng.normal(scale=0.05, size=(20, DIMENSION)).astype(np.float32), real, -real]:
        assert codes.sign_bits(vector, real) == codes.sign_bits(codes.asked(vector, E5))


def ingest_many(count: int) -> tuple[Any, DocumentVersion, np.ndarray]:
    """One published document whose ``count`` entries carry e5-leaning vectors under e5's name."""
    tenant = make_tenant("acme")
    result = upload(tenant, b"Harbor staff report the boats every week.", "a.txt")
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    version = DocumentVersion.objects.get(pk=result.version.pk)
    first = version.chunks.count()
    Chunk.objects.bulk_create(
        Chunk(version=version, ordinal=o, text=f"chunk {o}", page_start=1, page_end=1)
        for o in range(first, count)
    )
    chunks = {c.ordinal: c for c in version.chunks.all()}
    IndexEntry.objects.filter(version=version).update(embedder=E5)
    IndexEntry.objects.bulk_create(
        IndexEntry(
            tenant=tenant,
            document_id=version.document_id,
            version=version,
            chunk=chunks[o],
            ordinal=o,
            batch=0,
            embedder=E5,
        )
        for o in range(first, count)
    )
    DocumentVersion.objects.filter(pk=version.pk).update(entries=count)
    vectors = leaning(seed=5)[0][:count]
    index = search_index()
    index.prepare(E5, DIMENSION)
    index.write_vectors(version.pk, 0, E5, list(range(count)), vectors)
    if connection.vendor == "postgresql":
        # The statistics autovacuum would gather after a load this size: without them the
        # planner takes the 3,000 fresh rows for one and joins the shortlist back the slow way.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE documents_chunkvector, documents_indexentry")
    return tenant, version, vectors


def test_the_databases_code_of_an_e5_vector_is_the_centred_code_the_query_is_given():
    if connection.vendor != "postgresql":
        pytest.skip("the codes are PostgreSQL's")
    _, version, vectors = ingest_many(4)
    special = [*tricky_vectors(DIMENSION), *vectors]
    if pgvector.enabled(connection):  # the graph's half-precision copy holds up to 65,504
        special = [v for v in special if np.abs(v).max() < 65504]
    centre = centres.centre(E5)
    with connection.cursor() as cursor:
        for vector in special:
            if pgvector.enabled(connection):
                cursor.execute(
                    f"UPDATE documents_chunkvector SET {pgvector.COLUMN} = %s::vector "
                    "WHERE version_id = %s AND ordinal = 0 AND embedder = %s RETURNING "
                    f"{codes.BITS}::text, binary_quantize(%s::vector)::text",
                    [pgvector.literal(vector), version.pk, E5, pgvector.literal(codes.asked(vector, E5))],
                )
                stored, asked = cursor.fetchone()
                assert stored == asked
            else:
                cursor.execute(
                    "UPDATE documents_chunkvector SET vector = %s WHERE version_id = %s AND ordinal = 0 "
                    f"AND embedder = %s RETURNING {codes.SIGN_BITS}::text",
                    [vector.tobytes(), version.pk, E5],
                )
                [stored] = cursor.fetchone()
                assert stored == codes.sign_bits(vector, centre)
                assert stored != codes.sign_bits(vector) or not vector.any()


def test_a_scope_of_e5_leaning_vectors_finds_its_exact_nearest_through_the_codes(monkeypatch):
    """400 of 3,000 codes re-ranked: the plain signs of these vectors keep about two thirds of
    the exact top 10 (checked here, on the same vectors), the centred ones all of it."""
    # pgvector: past the exact shortcut, and the codes (not the graph) rank the scope.
    monkeypatch.setattr(pgvector, "EXACT_BELOW", 1)
    monkeypatch.setattr(pgvector, "GRAPH_SHARE", 2.0)
    tenant, version, vectors = ingest_many(3000)
    entries = dict(IndexEntry.objects.filter(version=version).values_list("ordinal", "pk"))
    queries = leaning(seed=5)[1]
    scope = backends.Scope(tenant_id=tenant.pk, embedder=E5)
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]

    def plain_recall(q: np.ndarray, top: np.ndarray) -> float:
        stored = np.sign(vectors).astype(np.int16)
        shortlist = np.argsort(np.abs(stored - np.sign(q)).sum(axis=1), kind="stable")[: codes.SIGN_RERANK]
        found = shortlist[np.argsort(-(vectors[shortlist] @ q))[:10]]
        return len(set(found.tolist()) & set(top.tolist())) / 10

    found = []
    for q, top in zip(queries, exact, strict=True):
        ranked = search_index().dense(scope, q, 10, tokens=[])
        found.append(len({pk for pk, _ in ranked} & {entries[o] for o in top.tolist()}) / 10)
    assert np.mean(found) >= 0.95
    assert np.mean([plain_recall(q, top) for q, top in zip(queries, exact, strict=True)]) < 0.8
    assert ChunkVector.objects.filter(version=version, embedder=E5).count() == 3000


def test_pgvector_codes_made_before_the_centre_are_made_anew_by_the_next_migrate():
    """An install upgraded from a release whose pgvector codes were plain signs: the schema step
    that runs after every ``migrate`` finds the column's expression is not today's (by its
    stamp), and makes the codes again, centred."""
    if not pgvector.enabled(connection):
        pytest.skip("pgvector's codes")
    _, version, vectors = ingest_many(4)
    sql = (
        f"SELECT {codes.BITS}::text, binary_quantize({pgvector.COLUMN})::text, "
        f"binary_quantize(%s::vector)::text FROM documents_chunkvector "
        "WHERE version_id = %s AND ordinal = 1 AND embedder = %s"
    )
    params = [pgvector.literal(codes.asked(vectors[1], E5)), version.pk, E5]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {codes.BITS_INDEX}")
        cursor.execute(f"ALTER TABLE documents_chunkvector DROP COLUMN {codes.BITS}")
        cursor.execute(
            f"ALTER TABLE documents_chunkvector ADD COLUMN {codes.BITS} varbit "
            f"GENERATED ALWAYS AS (binary_quantize({pgvector.COLUMN})) STORED"
        )
        cursor.execute(sql, params)
        stored, plain, centred = cursor.fetchone()
        assert stored == plain != centred
        pgvector.ensure_schema(connection)
        cursor.execute(sql, params)
        stored, plain, centred = cursor.fetchone()
        assert stored == centred != plain
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s", [codes.BITS_INDEX])
        assert cursor.fetchone() is not None
        # Already today's: nothing is made again (the column keeps its place in the table).
        cursor.execute(
            "SELECT attnum FROM pg_attribute WHERE attrelid = 'documents_chunkvector'::regclass "
            "AND attname = %s",
            [codes.BITS],
        )
        before = cursor.fetchone()
        pgvector.ensure_schema(connection)
        cursor.execute(
            "SELECT attnum FROM pg_attribute WHERE attrelid = 'documents_chunkvector'::regclass "
            "AND attname = %s",
            [codes.BITS],
        )
        assert cursor.fetchone() == before
