"""A large tenant's full-text ranking reuses, within one process and for a minute, what it
reads besides its candidates: each term's count of entries (PostgreSQL: counting a term reads
every entry holding it, about as long as ranking the candidates at 1M chunks) and the average
page. A small tenant's are read on every search, so its scores stay exact after every change.
Run on the pass's real database (SQLite FTS5, PostgreSQL full text)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.retrieval import backends
from documents.retrieval.backends import Scope
from documents.retrieval.index import search_index
from documents.retrieval.text import query_tokens
from tests.documents.helpers import bulk_published, make_tenant

pytestmark = pytest.mark.django_db

COUNTING = "array_agg((SELECT count(*)"  # backends.DF_SQL: the terms' counts (PostgreSQL)
PAGE = "avg(p.search_terms)"  # backends.PAGE_LENGTH_SQL: the average page


@pytest.fixture(autouse=True)
def fresh(monkeypatch: Any) -> None:
    # Twelve entries make a tenant large here (a large one has 5,000: the same rule, faster).
    monkeypatch.setattr(backends, "LARGE_TENANT", 12, raising=False)
    monkeypatch.setattr(backends, "_large_tenant", {}, raising=False)


def searched(tenant: Any, text: str) -> tuple[list[tuple[int, float]], list[str]]:
    with CaptureQueriesContext(connection) as queries:
        ranked = search_index().lexical(Scope(tenant_id=tenant.pk, embedder=""), query_tokens(text), 10)
    return ranked, [q["sql"] for q in queries.captured_queries]


def read(statements: list[str], marker: str) -> list[str]:
    return [sql for sql in statements if marker in sql]


def fill(tenant: Any, documents: int) -> None:
    bulk_published(
        tenant, documents, 4, lambda n, o: f"lantern falcon harbour entry {o} of log {n} tide{n % 3}"
    )


def test_a_large_tenant_reads_its_term_counts_and_average_page_once_then_reuses_them() -> None:
    large = make_tenant("large")
    fill(large, 5)  # 20 entries
    first, statements = searched(large, "lantern tide1")
    assert first and read(statements, PAGE)
    if connection.vendor == "postgresql":
        assert len(read(statements, COUNTING)) == 1

    again, statements = searched(large, "lantern tide1")
    assert again == first  # the same scores from the reused figures
    assert not read(statements, PAGE) and not read(statements, COUNTING)

    # A term not counted yet is counted, alone.
    _, statements = searched(large, "tide1 harbour")
    assert not read(statements, PAGE)
    if connection.vendor == "postgresql":
        [counting] = read(statements, COUNTING)  # the statement as sent, its terms in it
        assert "harbour" in counting and "tide1" not in counting


def test_a_small_tenant_reads_them_on_every_search_and_a_large_one_after_a_minute(
    monkeypatch: Any,
) -> None:
    small = make_tenant("small")
    fill(small, 2)  # 8 entries
    for _ in range(2):
        _, statements = searched(small, "lantern tide1")
        assert read(statements, PAGE)
        if connection.vendor == "postgresql":
            assert read(statements, COUNTING)

    large = make_tenant("large")
    fill(large, 5)
    searched(large, "lantern tide1")
    clock = backends.time.monotonic()
    monkeypatch.setattr(backends.time, "monotonic", lambda: clock + backends.REUSE_SECONDS + 1)
    _, statements = searched(large, "lantern tide1")
    assert read(statements, PAGE)
    if connection.vendor == "postgresql":
        assert read(statements, COUNTING)


def test_the_average_entry_length_is_read_only_when_the_length_counts(monkeypatch: Any) -> None:
    # With B at 0 the formula multiplies the average by nothing; reading it took a sample of the
    # tenant's search texts on every search of a growing tenant (each probe of a bulk load).
    length = "avg(CASE WHEN s.search_text"  # backends.LENGTH_SQL
    tenant = make_tenant("lengths")
    fill(tenant, 2)
    monkeypatch.setattr(backends, "_tenant_rows", {})
    assert length in backends.LENGTH_SQL
    ranked, statements = searched(tenant, "lantern tide1")
    assert ranked and not read(statements, length)
