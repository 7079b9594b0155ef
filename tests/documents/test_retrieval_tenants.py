"""Full-text scores depend on the searching tenant's own index only: another tenant indexing
documents full of a word changes no score and no order this tenant sees for it (else a score
would tell whether other tenants' documents use a word). Run on the pass's real engine (SQLite
FTS5, PostgreSQL full text); and on SQLite, the migration that gave the index its per-tenant
terms fills it from the entries already there."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from documents.models import IndexEntry
from documents.retrieval.schema import FTS
from documents.retrieval.sqlite_fts import tenant_counts
from documents.search import search
from tests.documents.helpers import make_tenant
from tests.documents.test_retrieval import ingest

pytestmark = pytest.mark.django_db(transaction=True)

WORD = "zephyrine"
OURS = {
    "once.txt": f"The harbor office filed its {WORD} report with the spring budget of the board.",
    "twice.txt": f"{WORD.title()} tides and {WORD} winds: the harbor log of the northern pier.",
    "long.txt": (
        "The quarterly review of the northern harbor lists the staff, the boats, the budget, "
        f"the weather of every week and, once, a {WORD} storm that kept the fishing fleet in port "
        "while the board met to read the archive of the office and its yearly accounts."
    ),
    "none.txt": "The harbor staff counted the boats and the gulls above the quiet market square.",
}
QUERIES = [WORD, f"{WORD} harbor", f"harbor {WORD} budget boats"]


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def seen(tenant) -> dict[tuple[str, str], list[tuple[object, int, float, float]]]:
    """What the tenant sees for each query and mode: hits in order, their full-text score and
    their fused score."""
    return {
        (query, mode): [
            (h.version_id, h.ordinal, h.scores.get("lexical", 0.0), h.score)
            for h in search(tenant, query, k=10, mode=mode)
        ]
        for query in QUERIES
        for mode in ("lexical", "hybrid")
    }


def flood(tenant) -> None:
    """Fill the tenant's index with ``WORD`` (in every chunk, many times, in long and short
    chunks) and with the other query words: on whole-table statistics the word's rarity, the
    number of chunks and their average length would all move."""
    filler = "the boats of the harbor and the budget of the board were counted again this week. "
    ingest(tenant, (f"{WORD} " * 40 + filler * 12), "flood.txt")
    for n in range(12):
        ingest(tenant, f"{WORD} {WORD} harbor {WORD} note {n}.", f"note-{n}.txt")


def test_another_tenant_indexing_a_word_changes_no_score_or_order_this_tenant_sees():
    acme, globex = make_tenant("acme"), make_tenant("globex")
    for name, text in OURS.items():
        ingest(acme, text, name)
    before = seen(acme)
    assert [len(before[(q, "lexical")]) for q in QUERIES] == [3, 4, 4]
    assert all(score > 0 for hits in before.values() for _, _, score, _ in hits)

    flood(globex)

    assert seen(acme) == before


def test_the_index_migration_fills_each_tenants_terms_and_counts_from_the_entries_there():
    if connection.vendor != "sqlite":
        pytest.skip("the migration changes SQLite's full-text index only")
    acme, globex = make_tenant("acme"), make_tenant("globex")
    for name, text in OURS.items():
        ingest(acme, text, name)
    flood(globex)
    before = seen(acme)
    counts = {t.pk: tenant_counts(t.pk) for t in (acme, globex)}
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("documents", "0012_webhook_owner")])
        # The earlier shape: one vocabulary for every tenant, the bare word in it.
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH %s", [WORD])
            assert cursor.fetchone()[0] == 3 + 13
            cursor.execute("SELECT count(*) FROM sqlite_master WHERE name = %s", [f"{FTS}_stats"])
            assert cursor.fetchone()[0] == 0
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert {t.pk: tenant_counts(t.pk) for t in (acme, globex)} == counts
    assert counts[acme.pk][0] == IndexEntry.objects.filter(tenant=acme).count()
    assert seen(acme) == before
