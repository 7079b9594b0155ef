"""A chunk's full-text score counts its document's evidence too: half its own BM25, half its
version's (the version's matching entries' term counts summed, its title counted once, with a
length norm over the version's words; ``documents.retrieval.backends.PAGE_WEIGHT``). Run on the
pass's real engine (SQLite FTS5, PostgreSQL full text): the scores equal a plain Python
reference on both, so both databases rank alike; the migration that keeps the title per version
fills it for versions indexed before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from documents.models import DocumentVersion, IndexEntry
from documents.retrieval.backends import Scope
from documents.retrieval.index import search_index
from documents.retrieval.text import query_tokens
from documents.search import search
from tests.documents.helpers import make_tenant
from tests.documents.test_retrieval import bm25, ingest

pytestmark = pytest.mark.django_db(transaction=True)

# Documents of other matters: the query's words stay rare (under the common-term cut).
TOPICS = ["garden", "river", "school", "market", "bridge", "library", "museum", "harbor", "bakery", "stadium"]
FILLER = {
    f"filler-{n}.txt": f"The {topic} committee met on day {n} and wrote a short note about it."
    for n, topic in enumerate(TOPICS * 3)
}
# The same in Chinese, of about the tire page's chunks' length: the pages' lengths are alike.
ZH_TOPICS = ["花园", "河流", "学校", "市场", "桥梁", "图书馆", "博物馆", "港口", "面包店", "体育场"]
ZH_FILLER = {
    f"报告-{n}.txt": f"第{n}号报告记录了{topic}的预算和人员安排。委员会下周再开会讨论。"
    for n, topic in enumerate(ZH_TOPICS * 3)
}
TIRE_PARTS = "\n\n".join(
    [
        "轮胎的花纹深度低于一点六毫米时就要更换。",
        "冬季胎在气温低于七度时抓地力更好。",
        "胎压每个月检查一次。长途之前也要检查。",
        "备胎也要定期检查气压和老化。",
    ]
)

CAT_PARTS = "\n\n".join(
    [
        "小猫满两个月后要带去医院。猫咪的疫苗一共打三针。",
        "幼猫每天喂四顿。成年后改为早晚两顿。",
        "长毛品种每周梳毛两次。换毛季节每天梳。",
    ]
)


@pytest.fixture(autouse=True)
def small_chunks(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40


def lexical(tenant, query: str) -> list[tuple[int, float]]:
    scope = Scope(tenant_id=tenant.pk, embedder="")
    return search_index().lexical(scope, query_tokens(query), 50)


def same(ranked: list[tuple[int, float]], query: str, tenant: Any) -> bool:
    """The same entries as the Python reference (``test_retrieval.bm25``), in the same order, with
    the same scores (to rounding)."""
    scores = bm25(tenant, query_tokens(query))
    expected = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [i for i, _ in ranked] == [i for i, _ in expected] and [s for _, s in ranked] == pytest.approx(
        [s for _, s in expected], rel=1e-9
    )


def test_a_title_every_chunk_repeats_counts_once_so_the_content_words_win():
    tenant = make_tenant("acme")
    for name, text in ZH_FILLER.items():
        ingest(tenant, text, name)
    cars = ingest(tenant, TIRE_PARTS, "汽车轮胎什么时候该换.txt")
    cats = ingest(tenant, CAT_PARTS, "猫咪护理.txt")
    # The tire page's chunks each open with its title, and so hold 什么, 么时 and 时候.
    assert cars.index_entries.count() >= 3
    assert all(e.search_text.startswith(cars.search_title + " ") for e in cars.index_entries.all())
    assert "时候" in cars.search_title.split()

    hits = search(tenant, "猫咪什么时候打疫苗", k=5, mode="lexical")
    assert hits[0].version_id == cats.pk
    # As the reference ranks them, scores included: the title counted once.
    ranked = lexical(tenant, "猫咪什么时候打疫苗")
    assert same(ranked, "猫咪什么时候打疫苗", tenant)
    # The title's words score (they are not common in the tenant): the tire page is a hit.
    assert {cars.pk, cats.pk} <= set(
        IndexEntry.objects.filter(id__in=[i for i, _ in ranked]).values_list("version_id", flat=True)
    )


def test_a_page_holding_every_query_word_outranks_a_chunk_repeating_one():
    tenant = make_tenant("acme")
    for name, text in FILLER.items():
        ingest(tenant, text, name)
    both = (
        "A zeppelin moored above the old harbor town for the whole week.\n\n"
        "A quokka lives in the dunes near the old lighthouse on the cape."
    )
    guide = ingest(tenant, both, "guide.txt")
    assert guide.index_entries.count() == 2
    flights = "Zeppelin flights leave the field at noon, and every zeppelin is back before the storms."
    repeats = ingest(tenant, flights, "flights.txt")
    query = "zeppelin quokka"
    # Chunk by chunk, the chunk saying "zeppelin" twice is best; the guide's page holds both words.
    ranked = lexical(tenant, query)
    version_of = dict(IndexEntry.objects.values_list("id", "version_id"))
    assert version_of[ranked[0][0]] == guide.pk
    assert repeats.pk in {version_of[i] for i, _ in ranked}
    assert same(ranked, query, tenant)


def test_the_migration_keeps_each_versions_title_and_words_as_indexing_does():
    tenant = make_tenant("acme")
    for name, text in FILLER.items():
        ingest(tenant, text, name)
    cars = ingest(tenant, TIRE_PARTS, "汽车轮胎什么时候该换.txt")
    kept = dict(DocumentVersion.objects.values_list("pk", "search_title"))
    terms = dict(DocumentVersion.objects.values_list("pk", "search_terms"))
    assert kept[cars.pk] and terms[cars.pk] == sum(
        len(e.search_text.split()) for e in cars.index_entries.all()
    ) - (cars.index_entries.count() - 1) * len(kept[cars.pk].split())
    before = lexical(tenant, "什么时候更换轮胎")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("documents", "0019_vector_codes_two_bits")])
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert dict(DocumentVersion.objects.values_list("pk", "search_title")) == kept
    assert dict(DocumentVersion.objects.values_list("pk", "search_terms")) == terms
    assert lexical(tenant, "什么时候更换轮胎") == before
