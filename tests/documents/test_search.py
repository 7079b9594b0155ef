"""Search over ingested documents: the caller's tenant only, published versions only, results that
say where they come from, and ``k`` honoured."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from documents.models import DocumentVersion, IndexEntry
from documents.search import search
from jobs.models import Status
from tests.conftest import wait_for
from tests.documents import files
from tests.documents.helpers import (
    JobThread,
    found_versions,
    hits_for,
    job_of,
    make_tenant,
    paused_after,
    reload_job,
    run_until_idle,
    upload,
)

pytestmark = pytest.mark.django_db(transaction=True)

# Each page is a little over the chunk target, so each page becomes one chunk.
ATLAS_PAGES = [
    "Amber falcon crosses the northern ridge while shepherds count their sheep under a grey autumn sky.",
    "Cobalt harbor wakes before the fishing boats, and gulls circle the quiet market square at dawn.",
    "Velvet orchard hums through the spring night as bees return to hives along the old stone wall.",
]
LIGHTHOUSE_PAGES = [
    f"The lighthouse keeper logged storm number {n} in the ledger before the evening watch began again."
    for n in range(1, 6)
]


@pytest.fixture(autouse=True)
def small_chunks(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    # The smallest chunks allowed: one per page of these test documents, so a hit names one page.
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40


def ingest(tenant, data: bytes, filename: str = "doc.pdf") -> DocumentVersion:
    result = upload(tenant, data, filename)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return DocumentVersion.objects.get(pk=result.version.pk)


def test_a_tenant_never_finds_another_tenants_identical_document():
    acme, globex = make_tenant("acme"), make_tenant("globex")
    ours = ingest(acme, files.text_pdf())
    theirs = ingest(globex, files.text_pdf())
    query = files.PAGE_PHRASES[1]

    acme_hits, globex_hits = hits_for(acme, query), hits_for(globex, query)

    assert acme_hits and globex_hits
    assert {h.document_id for h in acme_hits} == {ours.document_id}
    assert {h.document_id for h in globex_hits} == {theirs.document_id}


def test_a_document_only_in_another_tenant_is_not_found():
    acme, globex = make_tenant("acme"), make_tenant("globex")
    ingest(acme, files.text_pdf())
    ingest(globex, files.text_pdf(["Marmalade submarine surfaces at noon."]))
    assert hits_for(acme, "Marmalade submarine surfaces at noon") == []
    assert hits_for(globex, "Marmalade submarine surfaces at noon") != []


def test_a_hit_names_its_document_version_page_snippet_and_score():
    tenant = make_tenant("acme")
    version = ingest(tenant, files.text_pdf(ATLAS_PAGES), "atlas.pdf")
    assert version.chunks.count() == 3

    hits = hits_for(tenant, "Velvet orchard hums through the spring night")

    best = hits[0]
    assert (best.document_id, best.version_id, best.version) == (version.document_id, version.pk, 1)
    assert best.document_title == "atlas.pdf"
    assert (best.page_start, best.page_end) == (3, 3)
    assert "Velvet orchard hums through the spring night" in best.snippet
    assert 0 < best.score <= 1.0001
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.score < best.score for h in hits[1:])


def test_an_unpublished_version_is_not_found_even_with_its_index_rows_written():
    tenant = make_tenant("acme")
    result = upload(tenant, files.text_pdf(), "draft.pdf")
    assert result.job is not None
    with paused_after("indexing") as gate:
        worker = JobThread(result.job.pk)
        worker.start()
        gate.wait_reached()
        # Indexed and probed, not yet published: the index holds it, search must not show it.
        assert IndexEntry.objects.filter(version=result.version).exists()
        assert reload_job(result.job).status == Status.RUNNING
        assert hits_for(tenant, files.PAGE_PHRASES[0]) == []
        probe = search(tenant, files.PAGE_PHRASES[0], version=result.version.pk)
        assert {h.version_id for h in probe} == {result.version.pk}
        gate.release.set()
        worker.finish()
    assert job_of(result.version).status == Status.READY
    assert found_versions(tenant, files.PAGE_PHRASES[0]) == {result.version.pk}


def test_k_bounds_the_number_of_hits():
    tenant = make_tenant("acme")
    version = ingest(tenant, files.text_pdf(LIGHTHOUSE_PAGES))
    assert version.chunks.count() == 5  # every chunk matches the query below
    for k, expected in [(0, 0), (1, 1), (3, 3), (5, 5), (50, 5)]:
        hits = hits_for(tenant, "lighthouse keeper storm ledger", k=k)
        assert len(hits) == expected, k
        assert len({h.ordinal for h in hits}) == expected, k


def test_a_query_with_no_words_in_common_finds_nothing():
    tenant = make_tenant("acme")
    ingest(tenant, files.text_pdf())
    assert hits_for(tenant, "quantum zeppelin") == []
    assert hits_for(tenant, "   ") == []


def ranked(tenant, query: str) -> list[tuple[object, int, dict[str, int]]]:
    return [(h.version_id, h.ordinal, h.ranks) for h in search(tenant, query, k=4)]


@pytest.mark.postgres
def test_a_hybrid_search_ranks_full_text_on_a_second_connection_and_gives_it_back(settings, monkeypatch):
    """On PostgreSQL the full-text ranking of a hybrid search runs beside the ranking by meaning,
    on another connection (so the search takes the longer of the two, not their sum): the same
    hits as one after the other, and no connection left open behind it."""
    from django.db import connection

    from documents.retrieval.index import PostgresIndex

    tenant = make_tenant("acme")
    atlas = ingest(tenant, files.text_pdf(ATLAS_PAGES), "atlas.pdf")
    ingest(tenant, files.text_pdf(LIGHTHOUSE_PAGES), "lighthouse.pdf")
    queries = [ATLAS_PAGES[1], "storm ledger keeper", "orchard bees spring"]
    settings.SEARCH_CONCURRENT = False
    one_after_the_other = {q: ranked(tenant, q) for q in queries}

    settings.SEARCH_CONCURRENT = True
    side: list[int] = []  # full-text rankings run off the caller's thread, by connection
    real_lexical = PostgresIndex.lexical  # PgvectorIndex ranks full text the same way

    def lexical_noting_its_connection(*args, **kwargs):
        # (Without pgvector the ranking by meaning also calls it, for its candidates, inline.)
        if threading.current_thread() is not threading.main_thread():
            connection.ensure_connection()
            side.append(connection.connection.info.backend_pid)
        return real_lexical(*args, **kwargs)

    monkeypatch.setattr(PostgresIndex, "lexical", lexical_noting_its_connection)
    connection.ensure_connection()
    ours = connection.connection.info.backend_pid

    def open_connections() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            return int(cursor.fetchone()[0])

    before = open_connections()
    concurrent = {q: ranked(tenant, q) for q in queries}
    assert concurrent == one_after_the_other
    assert len(side) == len(queries) and ours not in side
    # (A closed connection's server process ends a moment after the client has let go.)
    wait_for(
        lambda: open_connections() == before, timeout=10, interval=0.05, what="the side connections closed"
    )
    assert concurrent[ATLAS_PAGES[1]][0][0] == atlas.pk
