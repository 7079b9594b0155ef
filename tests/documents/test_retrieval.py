"""Hybrid retrieval on the real engines of the pass (SQLite FTS5 + sqlite-vec; PostgreSQL full text
and its dense fallback, or pgvector): rare tokens, long chunks, CJK, modes and their scores,
filters inside the query, the probe, and the one removal path taking the full-text rows along."""

from __future__ import annotations

import os
from collections import Counter
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.causes import INDEX_WRITE_FAILED
from documents.models import ChunkVector, Document, DocumentVersion, IndexEntry
from documents.retrieval import pgvector
from documents.retrieval.backends import K1, PAGE_B, PAGE_WEIGHT, B, Scope, scoring_terms
from documents.retrieval.index import search_index
from documents.retrieval.schema import FTS
from documents.retrieval.sqlite_fts import tenant_counts, tenant_term
from documents.retrieval.text import query_tokens
from documents.search import search
from documents.services.publish import remove_outputs
from documents.stages.index import probe
from jobs.errors import StageFailure
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db(transaction=True)

RARE = "quxlorbital"
FILLER = (
    "The quarterly report describes the harbor, the budget and the staff of the northern office. "
    "Every department reviewed the budget and the report before the board met in the spring. "
)
SHORT_DOCS = {
    "budget.txt": "The budget report of the harbor office lists the staff and the spring review.",
    "board.txt": "The board met in the spring and read the quarterly report of every department.",
    "harbor.txt": "Harbor staff report the boats, the budget and the northern weather every week.",
    "office.txt": "The northern office keeps the report archive and the budget of the harbor.",
    "review.txt": "A review of the report: the budget, the staff and the board of the office.",
}
CHINESE = {
    "orchard.txt": "春天的果园很安静。蜜蜂沿着古老的石墙回到蜂巢。",
    "harbor-zh.txt": "港口的渔船已经出发。海鸥在安静的市场上空盘旋。",
    "library.txt": "图书馆的档案室保存着城市一百年来的地图和报纸。",
}


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def ingest(tenant, text: str, filename: str) -> DocumentVersion:
    result = upload(tenant, text.encode(), filename)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return DocumentVersion.objects.get(pk=result.version.pk)


def long_document_with(token: str) -> str:
    # One chunk of about 220 words with the token once, in the middle.
    words = (FILLER * 8).split()
    return " ".join([*words[:110], token, *words[110:220]])


@pytest.fixture
def library():
    tenant = make_tenant("acme")
    long = ingest(tenant, long_document_with(RARE), "long.txt")
    assert long.chunks.count() == 1 and len(long.chunks.get().text.split()) > 200
    others = {name: ingest(tenant, text, name) for name, text in SHORT_DOCS.items()}
    return SimpleNamespace(tenant=tenant, long=long, others=others)


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_an_exact_rare_token_in_a_long_chunk_ranks_that_chunk_first(library, mode):
    hits = search(library.tenant, RARE, k=5, mode=mode)
    assert hits and hits[0].version_id == library.long.pk
    # With common words beside it, the rare token still decides.
    hits = search(library.tenant, f"{RARE} budget report", k=5, mode=mode)
    assert hits[0].version_id == library.long.pk


def test_each_hit_reports_its_fused_score_and_the_ranks_and_scores_of_its_lists(library):
    hybrid = search(library.tenant, "harbor staff report the boats every week", k=5)
    assert hybrid[0].version_id == library.others["harbor.txt"].pk
    assert hybrid[0].ranks == {"lexical": 1, "semantic": 1}
    # First in both lists: more than either list can give alone (0.5 with equal weights), and
    # 1.0 only when the two lists are as clear about their winner (documents.retrieval.fusion).
    assert 0.5 < hybrid[0].score <= 1.0
    assert hybrid[0].score == max(h.score for h in hybrid)
    assert set(hybrid[0].scores) == {"lexical", "semantic"}
    assert 0 < hybrid[0].scores["semantic"] <= 1.0001
    assert all(0 < h.score <= 1 for h in hybrid)

    lexical = search(library.tenant, "budget", k=10, mode="lexical")
    semantic = search(library.tenant, "budget", k=10, mode="semantic")
    assert lexical and all(set(h.ranks) == {"lexical"} for h in lexical)
    assert semantic and all(set(h.ranks) == {"semantic"} for h in semantic)
    assert [h.ranks["lexical"] for h in lexical] == list(range(1, len(lexical) + 1))
    assert [h.score for h in lexical] == sorted((h.score for h in lexical), reverse=True)
    assert lexical[0].score == pytest.approx(1.0)  # a list alone ranks by itself


def test_a_chinese_query_finds_its_chunk_by_character_bigrams_in_every_mode():
    tenant = make_tenant("acme")
    versions = {name: ingest(tenant, text, name) for name, text in CHINESE.items()}
    # A span that starts and ends inside "words": no word boundary helps here.
    for mode in ("hybrid", "lexical", "semantic"):
        hits = search(tenant, "的渔船已经", k=3, mode=mode)
        assert hits and hits[0].version_id == versions["harbor-zh.txt"].pk, mode
    single = search(tenant, "馆", k=3, mode="lexical")
    assert [h.version_id for h in single] == [versions["library.txt"].pk]


# A query's bigrams: one of them four times in one chunk, three others once each in another.
REPEATS_ONE = "公司的食堂很大。公司的停车场在东边。公司的班车早上七点出发。公司的年会在十二月。"
HOLDS_THREE = "员工被辞退以后能拿到经济赔偿金。律师说明了计算方法和申请的时间。"
DISMISSAL = "被公司辞退能拿多少赔偿"


def bm25(tenant, tokens: list[str]) -> dict[int, float]:
    """The full-text score of the tenant's published entries for ``tokens``, computed here from
    their search texts: half of each chunk's Okapi BM25 (k1 1.2, b 0: no length norm, the idf
    that never goes negative) and half of its version's over its matching chunks' summed counts
    with its title counted once (b 0.75 over its words, title once, against the average
    published version), on the terms in at most a fifth of the entries (all the query's terms
    the tenant holds when none is that rare: ``scoring_terms``)."""
    entries = list(IndexEntry.objects.filter(tenant=tenant).values_list("id", "version_id", "search_text"))
    words = {i: Counter(text.split()) for i, _, text in entries}
    df = Counter(t for counts in words.values() for t in counts)
    average = sum(c.total() for c in words.values()) / len(entries)
    published = DocumentVersion.objects.filter(pk__in=Document.objects.values("published_version_id"))
    pages = {v.pk: v for v in published.filter(document__tenant=tenant)}
    length = {pk: v.search_terms or 0 for pk, v in pages.items()}
    average_page = sum(length.values()) / len(pages)
    scoring = scoring_terms(len(entries), dict(df), tokens)
    chunk: dict[int, float] = {}
    summed: dict[Any, Counter[str]] = {}
    holding: dict[Any, Counter[str]] = {}
    for i, version, _ in entries:
        found = {t: words[i][t] for t, _ in scoring if words[i][t]}
        if version not in pages or not found:
            continue
        norm = K1 * (1 - B + B * words[i].total() / average)
        chunk[i] = sum(w * found[t] * (K1 + 1) / (found[t] + norm) for t, w in scoring if t in found)
        summed.setdefault(version, Counter()).update(found)
        holding.setdefault(version, Counter()).update(found.keys())
    page: dict[Any, float] = {}
    for version, tf in summed.items():
        title = Counter(pages[version].search_title.split())
        norm = K1 * (1 - PAGE_B + PAGE_B * length[version] / average_page)
        once = {t: tf[t] - (holding[version][t] - 1) * title[t] for t in tf}
        page[version] = sum(w * once[t] * (K1 + 1) / (once[t] + norm) for t, w in scoring if once.get(t))
    version_of = {i: version for i, version, _ in entries}
    scores = {i: (1 - PAGE_WEIGHT) * s + PAGE_WEIGHT * page[version_of[i]] for i, s in chunk.items()}
    return scores


def test_a_chunk_with_more_of_a_chinese_querys_bigrams_outranks_one_repeating_a_single_bigram():
    # PostgreSQL once ranked by ts_rank_cd (each occurrence counting alike, no saturation):
    # the chunk saying 公司 four times came before the one holding 辞退, 能拿 and 赔偿.
    tenant = make_tenant("acme")
    for name, text in CHINESE.items():
        ingest(tenant, text, name)
    repeats = ingest(tenant, REPEATS_ONE, "canteen.txt")
    holds = ingest(tenant, HOLDS_THREE, "dismissal.txt")
    for mode in ("lexical", "hybrid"):
        hits = search(tenant, DISMISSAL, k=5, mode=mode)
        assert [h.version_id for h in hits[:2]] == [holds.pk, repeats.pk], mode


def test_both_databases_rank_full_text_by_the_same_bm25(library):
    tenant = library.tenant
    for name, text in {**CHINESE, "canteen.txt": REPEATS_ONE, "dismissal.txt": HOLDS_THREE}.items():
        ingest(tenant, text, name)
    for query in (DISMISSAL, "budget report of the harbor", f"{RARE} staff", "港口的渔船"):
        tokens = query_tokens(query)
        ranked = search_index().lexical(Scope(tenant_id=tenant.pk, embedder=""), tokens, 50)
        expected = bm25(tenant, tokens)
        assert dict(ranked) == pytest.approx(expected, rel=1e-6), query


def test_document_ids_and_where_fragments_run_inside_the_query_so_k_is_kept(library):
    wanted = library.others["review.txt"]
    # Every document matches "report"; restricted to one, k is filled from that one.
    hits = search(library.tenant, "report", k=3, document_ids=[wanted.document_id])
    assert [h.document_id for h in hits] == [wanted.document_id]
    hits = search(library.tenant, "report budget", k=10, where=[("d.title = %s", ["board.txt"])])
    assert {h.document_title for h in hits} == {"board.txt"}
    assert search(library.tenant, "report", k=3, document_ids=[]) == []


def test_the_probe_fails_a_version_whose_index_rows_are_missing(library):
    ctx = SimpleNamespace(input={"version_id": str(library.long.pk)}, shared={})
    probe(ctx)  # the rows are there: it passes
    IndexEntry.objects.filter(version=library.long).delete()
    with pytest.raises(StageFailure) as failure:
        probe(ctx)
    assert failure.value.cause == INDEX_WRITE_FAILED.code


def test_removing_a_versions_outputs_takes_its_full_text_rows_with_it():
    tenant = make_tenant("acme")
    v1 = ingest(tenant, f"A note about {RARE} and nothing else.", "note.txt")
    assert search(tenant, RARE, k=3, mode="lexical")
    # v2 replaces v1: v1's outputs go through remove_outputs (the one removal path).
    result = upload(tenant, b"A note about something else entirely.", "note.txt", document=v1.document)
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    remove_outputs(v1.pk, "indexing")  # idempotent: whether or not the cleanup already ran
    assert not IndexEntry.objects.filter(version=v1).exists()
    assert search(tenant, RARE, k=3, mode="lexical", version=v1.pk) == []
    if connection.vendor == "sqlite":
        # The FTS5 table has no foreign key: its rows went with the entries' delete trigger.
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {FTS} WHERE {FTS} MATCH %s", [tenant_term(tenant.pk, RARE)])
            assert cursor.fetchone()[0] == 0
            # And the tenant's counts with them: only the current version's entries are left.
            assert tenant_counts(tenant.pk)[0] == IndexEntry.objects.filter(tenant=tenant).count() > 0


def test_each_vector_is_stored_once_where_the_dense_ranking_of_this_database_reads_it(library):
    vectors = ChunkVector.objects.filter(version=library.long)
    assert vectors.count() == 1
    if os.environ.get("REQUIRE_PGVECTOR") == "1":  # set by the pgvector tests' child runs
        assert pgvector.enabled(connection)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT embedding IS NOT NULL FROM documents_chunkvector WHERE version_id = %s",
                [library.long.pk],
            )
            assert cursor.fetchone() == (True,)
            cursor.execute(
                "SELECT 1 FROM pg_class WHERE relname = %s", [pgvector.index_name(vectors.get().embedder)]
            )
            assert cursor.fetchone() is not None
        # Built with the graph's own parameters, not pgvector's defaults (m 16, ef_construction 64).
        assert _index_options(pgvector.index_name(vectors.get().embedder)) == GRAPH_OPTIONS
        assert bytes(vectors.get().vector) == b""
    else:
        assert not pgvector.enabled(connection)
        assert len(bytes(vectors.get().vector)) > 0


def test_the_index_driven_dense_plan_finds_what_the_exact_plan_finds(library, monkeypatch):
    # pgvector ranks small scopes exactly and larger ones through HNSW: force the HNSW plan on
    # this small library (elsewhere both runs take the same path and must agree as well).
    queries = ["budget report", f"{RARE} staff", "northern office archive"]
    exact = {q: [h.version_id for h in search(library.tenant, q, k=3, mode="semantic")] for q in queries}
    monkeypatch.setattr(pgvector, "EXACT_BELOW", 1)
    indexed = {q: [h.version_id for h in search(library.tenant, q, k=3, mode="semantic")] for q in queries}
    assert indexed == exact
    assert all(exact.values())


def test_the_publish_counts_the_versions_index_entries(library):
    for version in [library.long, *library.others.values()]:
        version.refresh_from_db()
        assert version.entries == IndexEntry.objects.filter(version=version).count() > 0


def test_a_selective_filter_is_ranked_by_binary_codes_and_finds_what_the_exact_plan_finds(
    library, monkeypatch
):
    """Past the exact shortcut, a scope that holds few of the probe's neighbours is ranked by its
    vectors' binary codes (read from their own index) and re-ranked at full precision, instead
    of walking a graph of every vector past them: it must agree with the exact plan."""
    titles = ["board.txt", "office.txt"]
    where = [("d.title IN (%s, %s)", titles)]
    queries = ["budget report", "the report of the northern office and the board", SHORT_DOCS["board.txt"]]

    def ranked() -> dict[str, list[object]]:
        return {
            q: [h.version_id for h in search(library.tenant, q, k=2, mode="semantic", where=where)]
            for q in queries
        }

    exact = ranked()
    monkeypatch.setattr(pgvector, "EXACT_BELOW", 1)
    with CaptureQueriesContext(connection) as queries_run:
        by_codes = ranked()
    assert by_codes == exact
    assert all(exact.values())
    assert {library.others[t].pk for t in titles} == set(exact["budget report"])
    if pgvector.enabled(connection):  # 2 of the probe's 6 neighbours are in scope: the codes answer
        assert sum("binary_quantize" in q["sql"] for q in queries_run.captured_queries) == len(queries)
        # Versions published before their entries were counted: the scope is counted by vectors.
        DocumentVersion.objects.update(entries=None)
        with CaptureQueriesContext(connection) as queries_run:
            assert ranked() == exact
        assert sum("binary_quantize" in q["sql"] for q in queries_run.captured_queries) == len(queries)
        monkeypatch.setattr(pgvector, "QUANTISED_BELOW", 1)  # a scope too large for the codes: the graph
        with CaptureQueriesContext(connection) as queries_run:
            assert ranked() == exact
        assert not any(
            "binary_quantize(" in q["sql"] and "WITH near" in q["sql"] for q in queries_run.captured_queries
        )


def _index_state(name: str) -> bool | None:
    """Whether the index ``name`` is valid (None: there is none)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
            "WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


GRAPH_OPTIONS = {"m": "32", "ef_construction": "128"}


def _index_options(name: str) -> dict[str, str]:
    """The storage options the index ``name`` was built with."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [name])
        options = cursor.fetchone()[0] or []
    return dict(option.split("=", 1) for option in options)


# The module's tests run with transaction=True: CREATE INDEX CONCURRENTLY runs outside a transaction.
def test_search_index_rebuilds_an_embedders_vector_index_in_its_current_shape(library, monkeypatch):
    out = StringIO()
    if os.environ.get("REQUIRE_PGVECTOR") != "1":
        call_command("search_index", stdout=out)
        assert "Nothing to build" in out.getvalue()
        return
    # A database upgraded from the earlier indexes (full precision, then half precision with
    # pgvector's default build parameters): the new one is missing, the old ones are there.
    embedder = ChunkVector.objects.filter(version=library.long).get().embedder
    new = pgvector.index_name(embedder)
    full, half = pgvector._old_index_names(embedder)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT vector_dims(embedding) FROM documents_chunkvector WHERE embedder = %s LIMIT 1", [embedder]
        )
        dimension = cursor.fetchone()[0]
        cursor.execute(f"DROP INDEX {new}")
        cursor.execute(
            f"CREATE INDEX {full} ON documents_chunkvector USING hnsw "
            f"((embedding::vector({dimension})) vector_cosine_ops) WHERE embedder = %s",
            [embedder],
        )
        cursor.execute(
            f"CREATE INDEX {half} ON documents_chunkvector USING hnsw "
            f"((embedding::halfvec({dimension})) halfvec_cosine_ops) WHERE embedder = %s",
            [embedder],
        )
    assert (_index_state(new), _index_state(full), _index_state(half)) == (None, True, True)
    call_command("search_index", stdout=out)
    assert f"{embedder}: built index {new}" in out.getvalue()
    assert (_index_state(new), _index_state(full), _index_state(half)) == (True, None, None)
    assert _index_options(new) == GRAPH_OPTIONS
    # Run again: nothing to do; and the dense ranking answers through the rebuilt index.
    again = StringIO()
    call_command("search_index", stdout=again)
    assert f"{embedder}: index {new} is in place" in again.getvalue()
    monkeypatch.setattr(pgvector, "EXACT_BELOW", 1)  # the HNSW plan even for this small library
    hits = search(library.tenant, SHORT_DOCS["harbor.txt"], k=3, mode="semantic")
    assert hits and hits[0].version_id == library.others["harbor.txt"].pk
