"""Retrieval quality on the repo's labelled relevance set, per search mode, through the real
pipeline and the user's search: hit@1 / hit@3 per query kind must stay at or above the measured
thresholds of the configured embedder (a table: each embedder has its own), so a regression fails.

The floors set for hybrid mode hold: exact rare tokens 100% at rank 1,
Chinese >= 75% in the top 3, and English paraphrases >= 85% in the top 3 — which needs a semantic
model ranked as such (sqlite-vec, pgvector, or PostgreSQL without pgvector ranking every vector
of the scope by its binary code): the lexical hashing embedder cannot meet it; its rows say what
it reaches instead. The default model and multilingual-e5 (with its own fusion profile) are run
here on purpose, whatever the suite's embedder (``test_the_default_model_meets_the_floors``,
``test_e5_meets_its_measured_rates_with_its_own_separation``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from documents.embedders import configured_embedder
from documents.models import Tenant
from documents.retrieval import pgvector
from documents.search import search
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload
from tests.documents.relevance import load_corpus, score

# Loads the embedding model and ingests the labelled set: left out of the fast tier.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# (mode, kind) -> (hit@1 at least, hit@3 at least): the floors for hybrid search.
FLOORS = {
    ("hybrid", "exact"): (1.0, 1.0),
    ("hybrid", "paraphrase"): (0.0, 0.85),
    ("hybrid", "chinese"): (0.0, 0.75),
}
# The lexical hashing embedder, the lower of the SQLite and PostgreSQL passes (PostgreSQL without
# pgvector ranks the same vectors as SQLite since it ranks the whole scope by binary codes).
HASHING = {
    ("hybrid", "exact"): (1.0, 1.0),
    ("hybrid", "paraphrase"): (0.45, 0.68),  # 12/22, 15/22 on both (13/22 first by rank fusion)
    # 14/15, 15/15 on both; 13/15 at rank 1 while BM25 normalised a chunk's length (b 0.75),
    # which put a document's short last chunk, or one repeating a single bigram, first
    ("hybrid", "chinese"): (0.93, 0.93),
    ("lexical", "exact"): (1.0, 1.0),
    ("lexical", "paraphrase"): (0.45, 0.63),  # 12/22, 15/22 on both (one BM25)
    # 14/15, 15/15 on both since a chunk's score counts its page's evidence with the title once
    # (14/15 in the top 3 by the best chunk alone; 13/15 first with b 0.75)
    ("lexical", "chinese"): (0.93, 1.0),
    # 8/13, 9/13 on both: each chunk's embedded text now opens with its document's title and
    # heading path, words that dilute a bag-of-words vector of a short part number (hybrid and
    # lexical still find every one first)
    ("semantic", "exact"): (0.61, 0.69),
    ("semantic", "paraphrase"): (0.09, 0.40),  # 2/22, 9/22 on both
    ("semantic", "chinese"): (0.73, 0.93),  # 11/15, 15/15 on both
}
# The default model (all-MiniLM-L6-v2) where its vectors are ranked as such (SQLite's sqlite-vec,
# pgvector), measured on SQLite and PostgreSQL with the fusion by scores: hybrid exact 13/13 at
# rank 1, paraphrase 16/22 and 21/22 (16/22 and 22/22 by rank fusion), Chinese 13/15 and 14/15,
# as the full-text list (9/15 at rank 1 while its vectors of Chinese queries, noise for an
# English model, were fused at full weight); semantic paraphrase 21/22.
DEFAULT_MODEL = {
    ("hybrid", "exact"): (1.0, 1.0),
    ("hybrid", "paraphrase"): (0.68, 0.9),
    ("hybrid", "chinese"): (0.86, 0.93),
    ("lexical", "exact"): (1.0, 1.0),
    ("semantic", "paraphrase"): (0.9, 0.9),
}
# Both databases rank full text by the same BM25 (13/15 Chinese first and 14/15 in the top 3 on
# each; PostgreSQL's ts_rank_cd put 12/15 first). With the English model, hybrid follows the
# full-text list there (the model's Chinese neighbours get no weight).
HASHING_POSTGRES = HASHING
DEFAULT_MODEL_POSTGRES = {**DEFAULT_MODEL, ("hybrid", "chinese"): (0.73, 0.93)}
# multilingual-e5 (EMBEDDINGS_BACKEND=e5) with its own separation, above its floor and against
# the 10th score (documents/embedders/e5.py), the same on SQLite and PostgreSQL without pgvector:
# hybrid paraphrase 16/22 and 20/22 (14/22 and 19/22 with the shipped separation, against the
# 5th as a share of the 1st), Chinese 14/15 and 15/15, exact 13/13; semantic paraphrase 21/22
# and 22/22, Chinese 15/15, exact 10/13 and 11/13 with its chunk sizes (7/13 and 9/13 at 350 /
# 500 tokens).
E5_MODEL = {
    ("hybrid", "exact"): (1.0, 1.0),
    ("hybrid", "paraphrase"): (0.72, 0.9),
    ("hybrid", "chinese"): (0.93, 1.0),
    ("lexical", "exact"): (1.0, 1.0),
    ("semantic", "paraphrase"): (0.95, 1.0),
    ("semantic", "chinese"): (1.0, 1.0),
}
THRESHOLDS: dict[tuple[str, str], dict[tuple[str, str], tuple[float, float]]] = {
    ("hashing", "sqlite"): HASHING,
    ("hashing", "postgresql"): HASHING_POSTGRES,
    ("hashing", "pgvector"): HASHING_POSTGRES,
    ("local", "sqlite"): DEFAULT_MODEL,
    ("local", "pgvector"): DEFAULT_MODEL_POSTGRES,
    # Without pgvector, by binary codes over the whole scope, measured: hybrid paraphrase 16/22
    # and 21/22, Chinese 9/15 and 15/15; semantic paraphrase 21/22 (it was 16/22 in the top 3
    # when only the full-text candidates were re-ranked).
    ("local", "postgresql"): DEFAULT_MODEL_POSTGRES,
    ("e5", "sqlite"): E5_MODEL,
    ("e5", "postgresql"): E5_MODEL,
}
# What cannot reach a floor, said here rather than hidden (see the module's docstring).
BELOW_FLOOR = {
    ("hashing", "sqlite"): {("hybrid", "paraphrase")},
    ("hashing", "postgresql"): {("hybrid", "paraphrase")},
    ("hashing", "pgvector"): {("hybrid", "paraphrase")},
}


def where_ranked() -> str:
    """Where dense vectors are ranked: ``sqlite``, ``pgvector`` or ``postgresql`` (the fallback)."""
    if connection.vendor == "sqlite":
        return "sqlite"
    return "pgvector" if pgvector.enabled(connection) else "postgresql"


def ingest_corpus(tmp_path: Path) -> tuple[Tenant, dict[str, str]]:
    tenant = make_tenant("relevance")
    labels: dict[str, str] = {}
    for doc in load_corpus():
        result = upload(tenant, doc["text"].encode(), f"{doc['id']}.txt", title=doc["title"])
        assert result.job is not None
        assert run_until_idle(result.job.pk).status == Status.READY
        labels[str(result.version.document_id)] = doc["id"]
    return tenant, labels


@pytest.fixture
def corpus_tenant(settings, tmp_path: Path) -> tuple[Tenant, dict[str, str]]:
    settings.MEDIA_ROOT = tmp_path / "media"
    return ingest_corpus(tmp_path)


def corpus_with(backend: str, settings: Any, tmp_path: Path) -> Iterator[tuple[Tenant, dict[str, str]]]:
    """The corpus ingested and searched with embedder ``backend``, whatever the suite's
    (tests/settings.py keeps the lexical one for speed elsewhere)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.EMBEDDINGS_BACKEND = backend
    configured_embedder.cache_clear()
    try:
        yield ingest_corpus(tmp_path)
    finally:
        configured_embedder.cache_clear()


@pytest.fixture
def default_model_corpus(settings, tmp_path: Path) -> Iterator[tuple[Tenant, dict[str, str]]]:
    """The corpus with the platform's default embedder."""
    yield from corpus_with("local", settings, tmp_path)


@pytest.fixture
def e5_corpus(settings, tmp_path: Path) -> Iterator[tuple[Tenant, dict[str, str]]]:
    """The corpus with multilingual-e5, the option for Chinese (and other non-English) text."""
    yield from corpus_with("e5", settings, tmp_path)


def check_thresholds(tenant: Tenant, labels: dict[str, str]) -> None:
    family = configured_embedder().name.split("-", 1)[0]
    key = (family, where_ranked())
    measured = {}
    for mode in ("hybrid", "lexical", "semantic"):

        def ranked(query: str, mode: str = mode) -> list[str]:
            return [labels[str(h.document_id)] for h in search(tenant, query, 10, mode=mode)]

        for kind, result in score(ranked).items():
            measured[(mode, kind)] = result
    report = f"{key}\n" + "\n".join(f"{mode:8} {result}" for (mode, _), result in sorted(measured.items()))
    print(report)
    for which, (at1, at3) in THRESHOLDS.get(key, FLOORS).items():
        result = measured[which]
        assert result.hit_at_1 >= at1 and result.hit_at_3 >= at3, f"{which}: {result}\n{report}"
    below = BELOW_FLOOR.get(key, set())
    for which, (at1, at3) in FLOORS.items():
        if which not in below:
            result = measured[which]
            assert result.hit_at_1 >= at1 and result.hit_at_3 >= at3, f"{which}: {result}\n{report}"


def test_each_mode_keeps_its_measured_hit_rates_on_the_labelled_set(corpus_tenant):
    check_thresholds(*corpus_tenant)


def test_the_default_model_meets_the_floors(default_model_corpus):
    assert configured_embedder().name.startswith("local-")
    check_thresholds(*default_model_corpus)


def test_e5_meets_its_measured_rates_with_its_own_separation(e5_corpus):
    """e5's rows hold only with its fusion profile (paraphrases first 16/22 against 14/22)."""
    assert configured_embedder().name.startswith("e5-")
    check_thresholds(*e5_corpus)
