"""PostgreSQL's full-text index takes an entry's words into its trees as the entry is written, so a
search for a word reads that word's few index pages however many entries were written since the
last vacuum. With GIN's default (``fastupdate``) the words wait in a pending list until a vacuum,
and every search reads the whole list for each of its words: during a bulk load, where the
indexing stage's probe searches after every version, that was most of the database's work."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction

from tests.documents.helpers import bulk_published, make_tenant

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's GIN index"),
]


def index_pages_read(word: str) -> int:
    """Pages of the full-text index a search for ``word`` reads (the bitmap index scan's own
    buffers, the planner kept on the index)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT count(*) FROM documents_indexentry "
            "WHERE search_tsv @@ to_tsquery('simple', %s)",
            [word],
        )
        [(plan,)] = cursor.fetchall()
    nodes = [plan[0]["Plan"] if isinstance(plan, list) else json.loads(plan)[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node["Node Type"] == "Bitmap Index Scan":
            return int(node["Shared Hit Blocks"]) + int(node["Shared Read Blocks"])
        nodes.extend(node.get("Plans", []))
    raise AssertionError(f"no index scan in {plan!r}")


def text(n: int, o: int) -> str:
    # Each entry its own hundred words, as documentation pages have: a large pending list.
    return f"entry{n}x{o} " + " ".join(f"w{n}v{o}t{i}" for i in range(100))


def test_a_search_reads_a_words_index_pages_not_every_entry_written_since_the_last_vacuum() -> None:
    tenant = make_tenant("pending")
    bulk_published(tenant, 2, 2, text)
    few = index_pages_read("entry1x1")
    bulk_published(tenant, 60, 5, text)  # 300 entries more, 30,000 words, no vacuum
    many = index_pages_read("entry1x1")
    assert few <= 4
    # The pending list would hold all 300 entries' words (dozens of pages, each read).
    assert many <= few + 2, (few, many)
