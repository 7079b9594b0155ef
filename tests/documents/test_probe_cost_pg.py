"""The indexing stage's probe searches one version; on PostgreSQL its full-text ranking reads that
version's entries only, however many entries of the tenant share its words. It went through the
tenant's full-text index instead: in a tenant whose every chunk says the probe's words it read
every one of them to keep the version's few (bench/README.md, "Bulk load")."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.models import DocumentVersion, IndexEntry, Tenant
from documents.retrieval.backends import DF_CAP, Scope
from documents.retrieval.index import search_index
from documents.retrieval.text import query_tokens
from documents.stages.index import probe
from jobs.models import Status
from tests.documents.helpers import bulk_published, make_tenant, run_until_idle, upload

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SHARED = "harbour tide ledger lantern orchard falcon copper meadow granite signal"
# 4,000 entries, every one holding the shared words: under DF_CAP, where the tenant's ranking
# takes every row holding them from the full-text index first.
DOCUMENTS, CHUNKS = 32, 125


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def fill(tenant: Tenant) -> None:
    """``DOCUMENTS`` published documents of ``CHUNKS`` entries each, written in bulk."""
    bulk_published(tenant, DOCUMENTS, CHUNKS, lambda n, o: f"{SHARED} entry {o} of log {n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE documents_indexentry")  # as autovacuum would have by then


def entries_read(sql: str) -> int:
    """Rows of the index entries table that ``sql`` reads (kept or filtered out), per EXPLAIN."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        [(plan,)] = cursor.fetchall()

    def read(node: dict[str, Any]) -> int:
        rows = 0
        if node.get("Relation Name") == IndexEntry._meta.db_table:
            seen = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            rows = (seen + node.get("Rows Removed by Index Recheck", 0)) * node["Actual Loops"]
        return rows + sum(read(child) for child in node.get("Plans", []))

    return read(plan[0]["Plan"])


def test_the_probe_reads_only_its_own_versions_entries_in_a_large_tenant() -> None:
    assert DOCUMENTS * CHUNKS < DF_CAP - 10
    tenant = make_tenant("acme")
    fill(tenant)
    text = "\n\n".join(f"{SHARED} and the note number {n} of the small report. " * 12 for n in range(3))
    result = upload(tenant, text.encode(), "small.txt")
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY  # probe found it
    version = DocumentVersion.objects.get(pk=result.version.pk)
    own = IndexEntry.objects.filter(version=version).count()
    assert 1 < own <= 5

    ctx: Any = SimpleNamespace(input={"version_id": str(version.pk)}, shared={})
    with CaptureQueriesContext(connection) as queries:
        probe(ctx)  # raises if it finds nothing
    [ranking] = [q["sql"] for q in queries.captured_queries if "ts_rank_cd" in q["sql"]]
    read = entries_read(ranking)
    assert read <= 2 * own, (read, own)

    # Ranked as the same (published) entries are through the tenant's index: the same BM25.
    tokens = query_tokens(SHARED)
    probed = Scope(tenant_id=tenant.pk, embedder="", version_id=version.pk)
    published = Scope(tenant_id=tenant.pk, embedder="", document_ids=[version.document_id])
    ranked = search_index().lexical(probed, tokens, 10)
    assert len(ranked) == own and all(score > 0 for _, score in ranked)
    assert dict(ranked) == pytest.approx(dict(search_index().lexical(published, tokens, 10)))


def relation_loops(sql: str, table: str) -> int:
    """How many times ``sql``'s plan reads ``table`` (its scans' loops), per EXPLAIN ANALYZE."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        [(plan,)] = cursor.fetchall()

    def loops(node: dict[str, Any]) -> int:
        own = node["Actual Loops"] if node.get("Relation Name") == table else 0
        return own + sum(loops(child) for child in node.get("Plans", []))

    return loops(plan[0]["Plan"])


def test_the_page_score_reads_each_candidates_version_once_not_once_per_pair() -> None:
    """A candidate's page score needs its version's row (title, length): once per candidate and
    term. Joined as a list of versions' scores against the list of candidates, the planner took
    both for one row and looped, reading the versions once per pair: seconds at 1M chunks."""
    tenant = make_tenant("acme")
    fill(tenant)
    tokens = query_tokens("lantern")  # in every one of the 4,000 entries of 32 versions
    with CaptureQueriesContext(connection) as queries:
        ranked = search_index().lexical(Scope(tenant_id=tenant.pk, embedder=""), tokens, 10)
    assert len(ranked) == 10
    [ranking] = [q["sql"] for q in queries.captured_queries if "ts_rank_cd" in q["sql"]]
    candidates = len(tokens) * DOCUMENTS * CHUNKS
    assert relation_loops(ranking, DocumentVersion._meta.db_table) <= candidates
