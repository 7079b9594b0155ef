"""Meaning over the whole scope on every database: PostgreSQL without pgvector ranks every vector
of the scope by its sign code (Hamming distance, in the query) and the nearest by their full
vectors, so a query sharing no word with its answer still finds it (it used to re-rank only the
full-text candidates); tenant, collection and attribute conditions hold inside that query, not
after its shortlist; and the codes are kept by the database for new rows and for existing ones.

The ranking tests run on every backend (SQLite and pgvector rank exactly or by their own index,
and must agree); the codes' own tests need PostgreSQL without pgvector.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from documents.embedders import configured_embedder
from documents.models import ChunkVector, Collection, Document, DocumentVersion, IndexEntry
from documents.retrieval import backends, codes, pgvector
from documents.retrieval.filters import parse_filter
from documents.retrieval.index import search_index
from documents.search import search
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "harbor boats weather report"


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def ingest(tenant: Any, text: str, filename: str) -> DocumentVersion:
    result = upload(tenant, text.encode(), filename)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return DocumentVersion.objects.get(pk=result.version.pk)


def plain_postgres() -> bool:
    return connection.vendor == "postgresql" and not pgvector.enabled(connection)


@pytest.fixture
def decoys(monkeypatch) -> SimpleNamespace:
    """One chunk in scope, close to the query but not the closest; the query's own text (the
    nearest possible) out of scope four ways: another tenant, another collection, another
    attribute value, and the same tenant with no filter at all. The shortlist the codes keep
    is cut to one row, so a condition applied after it would leave nothing."""
    monkeypatch.setattr(codes, "SIGN_RERANK", 1)
    monkeypatch.setattr(codes, "SIGN_RERANK_FACTOR", 1)
    acme, other = make_tenant("acme"), make_tenant("other")
    target = ingest(acme, "The harbor boats came back before the storm.", "target.txt")
    other_collection = ingest(acme, QUERY, "elsewhere.txt")
    other_dept = ingest(acme, QUERY, "other-dept.txt")
    other_tenant = ingest(other, QUERY, "theirs.txt")
    wanted = Collection.objects.create(tenant=acme, name="Wanted")
    Document.objects.filter(pk__in=[target.document_id, other_dept.document_id]).update(collection=wanted)
    Document.objects.filter(pk=target.document_id).update(attributes={"dept": "a"})
    Document.objects.filter(pk=other_dept.document_id).update(attributes={"dept": "b"})
    return SimpleNamespace(
        acme=acme,
        other=other,
        wanted=wanted,
        target=target,
        other_collection=other_collection,
        other_dept=other_dept,
        other_tenant=other_tenant,
    )


def versions(hits: list[Any]) -> list[Any]:
    return [h.version_id for h in hits]


def test_collection_and_attribute_filters_hold_inside_the_dense_query(decoys):
    dept_a = parse_filter({"type": "eq", "key": "dept", "value": "a"})
    hits = search(decoys.acme, QUERY, k=1, mode="semantic", collection_ids=[decoys.wanted.pk], filters=dept_a)
    assert versions(hits) == [decoys.target.pk]
    hits = search(decoys.acme, QUERY, k=1, mode="semantic", document_ids=[decoys.target.document_id])
    assert versions(hits) == [decoys.target.pk]
    # The collection alone admits the other department's copy of the query: it is the nearest.
    hits = search(decoys.acme, QUERY, k=1, mode="semantic", collection_ids=[decoys.wanted.pk])
    assert versions(hits) == [decoys.other_dept.pk]


def test_a_tenant_never_ranks_another_tenants_vectors(decoys):
    theirs = search(decoys.other, QUERY, k=5, mode="semantic")
    assert versions(theirs) == [decoys.other_tenant.pk]
    ours = search(decoys.acme, QUERY, k=5, mode="semantic")
    assert decoys.other_tenant.pk not in versions(ours)
    assert set(versions(ours)) == {decoys.target.pk, decoys.other_collection.pk, decoys.other_dept.pk}


def test_the_dense_ranking_needs_no_shared_word_and_reads_every_vector_of_the_scope():
    """The dense list alone, with no query words at all: every entry of the scope is a candidate
    (on PostgreSQL without pgvector it used to rank only the full-text candidates: none here)."""
    tenant = make_tenant("acme")
    stored = {
        name: ingest(tenant, text, name)
        for name, text in {
            "harbor.txt": "Harbor staff report the boats and the northern weather every week.",
            "orchard.txt": "Bees return along the old stone wall of the quiet orchard in spring.",
            "archive.txt": "The city archive keeps a hundred years of maps and newspapers.",
        }.items()
    }
    scope = backends.Scope(tenant_id=tenant.pk, embedder=configured_embedder().name)
    for version in stored.values():
        raw = ChunkVector.objects.filter(version=version).values_list("vector", flat=True).first()
        if raw:
            vector = np.frombuffer(bytes(raw), dtype=np.float32)
        else:  # pgvector keeps it in its own column
            vector = configured_embedder().embed([version.chunks.get().text])[0]
        ranked = search_index().dense(scope, np.asarray(vector, dtype=np.float32), 3, tokens=[])
        entry = IndexEntry.objects.get(version=version).pk
        assert ranked[0][0] == entry and ranked[0][1] > 0.99
        assert len(ranked) == 3


@pytest.fixture
def default_model(settings) -> Iterator[None]:
    settings.EMBEDDINGS_BACKEND = "local"
    configured_embedder.cache_clear()
    try:
        yield
    finally:
        configured_embedder.cache_clear()


def test_a_query_sharing_no_word_with_its_answer_finds_it_by_meaning(default_model):
    tenant = make_tenant("acme")
    car = ingest(tenant, "Our car needs new tyres and an oil change before the long winter trip.", "car.txt")
    ingest(tenant, "Bake the bread at two hundred degrees for forty minutes, then let it cool.", "bread.txt")
    ingest(tenant, "The committee approved the annual budget after a short debate.", "budget.txt")
    query = "automobile servicing"
    assert not set(query.split()) & set(car.chunks.get().text.lower().split())
    for mode in ("semantic", "hybrid"):
        hits = search(tenant, query, k=3, mode=mode)
        assert hits and hits[0].version_id == car.pk, mode


# --- the codes themselves (PostgreSQL without pgvector) ------------------------------------------


def stored_codes() -> list[tuple[bytes, str]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT vector, {codes.SIGN_BITS}::text FROM documents_chunkvector ORDER BY id")
        return [(bytes(v), c) for v, c in cursor.fetchall()]


def assert_codes_match_vectors() -> int:
    rows = stored_codes()
    for vector, code in rows:
        assert code == codes.sign_bits(np.frombuffer(vector, dtype=np.float32))
    return len(rows)


@pytest.mark.postgres
def test_new_and_copied_vectors_get_their_codes_from_the_database():
    if not plain_postgres():
        pytest.skip("the sign codes are PostgreSQL's without pgvector")
    tenant = make_tenant("acme")
    first = ingest(tenant, "Harbor staff report the boats every week.\n\nThe budget is due.", "a.txt")
    again = ingest(tenant, "Harbor staff report the boats every week.\n\nThe budget is due.", "b.txt")
    assert (
        ChunkVector.objects.filter(version=again).count() == ChunkVector.objects.filter(version=first).count()
    )
    assert assert_codes_match_vectors() == 2 * ChunkVector.objects.filter(version=first).count()
    assert all(len(code) == 2 * configured_embedder().dimension for _, code in stored_codes())


def tricky_vectors(dimension: int) -> list[np.ndarray]:
    """Vectors whose bytes the SQL must read as Python does: zeros of both signs, denormals,
    negatives, the smallest and largest magnitudes, and components whose high byte is 00 or 80."""
    rng = np.random.default_rng(3)
    special = np.array(
        [0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1e-38, -1e-38, 3.4e38, -3.4e38, 1.0, -1.0, 2e-39, -2e-39],
        dtype=np.float32,
    )
    out = [np.zeros(dimension, dtype=np.float32), np.full(dimension, -0.0, dtype=np.float32)]
    for _ in range(8):
        vector = rng.normal(size=dimension).astype(np.float32)
        vector[rng.random(dimension) < 0.7] = 0.0  # sparse, as the hashing embedder's
        picks = rng.random(dimension) < 0.2
        vector[picks] = rng.choice(special, int(picks.sum()))
        out.append(vector)
    return out


@pytest.mark.postgres
def test_the_databases_code_of_a_vector_is_the_one_the_query_is_given():
    """Two bits a dimension, (x > 0, x < 0), from the stored bytes: either zero is 00, a
    denormal counts as nonzero, and the code PostgreSQL computes equals ``sign_bits``."""
    if not plain_postgres():
        pytest.skip("the sign codes are PostgreSQL's without pgvector")
    tenant = make_tenant("acme")
    version = ingest(tenant, "Harbor staff report the boats every week.", "a.txt")
    row = ChunkVector.objects.filter(version=version).first()
    assert row is not None
    assert codes.sign_bits(np.array([1.0, 0.0, -1.0, -0.0, 1e-45], dtype=np.float32)) == "1000010010"
    for vector in tricky_vectors(configured_embedder().dimension):
        # The column is generated: an update of the vector computes its code again.
        ChunkVector.objects.filter(pk=row.pk).update(vector=vector.tobytes())
        with connection.cursor() as cursor:
            sql = f"SELECT {codes.SIGN_BITS}::text FROM documents_chunkvector WHERE id = %s"
            cursor.execute(sql, [row.pk])
            [code] = cursor.fetchone()
        assert code == codes.sign_bits(vector)
        assert len(code) == 2 * vector.shape[0]


def migrate(target: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)


def codes_migration() -> tuple[tuple[str, str], tuple[str, str]]:
    """(the migration that adds the codes, the one before it), found by name on disk."""
    loader = MigrationExecutor(connection).loader
    key = next(k for k in loader.disk_migrations if k[0] == "documents" and k[1].endswith("_vector_codes"))
    [before] = [d for d in loader.disk_migrations[key].dependencies if d[0] == "documents"]
    return key, before


@pytest.mark.postgres
def test_the_migration_fills_the_codes_of_vectors_written_before_it():
    if not plain_postgres():
        pytest.skip("the sign codes are PostgreSQL's without pgvector")
    tenant = make_tenant("acme")
    version = ingest(tenant, "Harbor staff report the boats every week.", "a.txt")
    _, before = codes_migration()
    try:
        migrate([before])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_attribute WHERE attrelid = 'documents_chunkvector'::regclass "
                "AND attname = %s AND NOT attisdropped",
                [codes.SIGN_BITS],
            )
            assert cursor.fetchone() is None
    finally:
        # Forward to the newest state, not only to the codes: later tests need every migration.
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        migrate(executor.loader.graph.leaf_nodes())
    assert assert_codes_match_vectors() >= 1
    hits = search(tenant, "boats harbor", k=1, mode="semantic")
    assert versions(hits) == [version.pk]


def one_bit_codes(vector: bytes) -> str:
    return "".join("1" if negative else "0" for negative in np.signbit(np.frombuffer(vector, np.float32)))


@pytest.mark.postgres
def test_the_two_bit_migration_rewrites_the_one_bit_codes_and_back():
    """The first codes (one sign bit a dimension) become two bits a dimension for every stored
    vector, and the migration's reverse restores them."""
    if not plain_postgres():
        pytest.skip("the sign codes are PostgreSQL's without pgvector")
    tenant = make_tenant("acme")
    version = ingest(tenant, "Harbor staff report the boats every week.\n\nThe budget is due.", "a.txt")
    loader = MigrationExecutor(connection).loader
    key = next(k for k in loader.disk_migrations if k[0] == "documents" and k[1].endswith("_two_bits"))
    [before] = [d for d in loader.disk_migrations[key].dependencies if d[0] == "documents"]
    try:
        migrate([before])
        rows = stored_codes()
        assert rows and all(code == one_bit_codes(vector) for vector, code in rows)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        migrate(executor.loader.graph.leaf_nodes())
    assert assert_codes_match_vectors() == len(rows)
    hits = search(tenant, "boats harbor", k=1, mode="semantic")
    assert versions(hits) == [version.pk]


def test_a_server_without_pgvector_is_asked_for_the_column_once_a_while_not_on_every_search(monkeypatch):
    if not plain_postgres():
        pytest.skip("PostgreSQL without pgvector only")

    def asked(calls: int) -> int:
        with CaptureQueriesContext(connection) as run:
            answers = {pgvector.enabled(connection) for _ in range(calls)}
        assert answers == {False}
        return sum("pg_attribute" in q["sql"] for q in run.captured_queries)

    pgvector.ensure_schema(connection)  # a schema change in this process: the next call asks
    assert asked(5) == 1
    now = pgvector.time.monotonic()
    monkeypatch.setattr(pgvector.time, "monotonic", lambda: now + pgvector.ABSENT_RECHECK_SECONDS + 1)
    assert asked(5) == 1  # after the recheck interval, once more (a migration elsewhere may add it)
