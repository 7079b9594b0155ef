"""The recall threshold again, on a real PostgreSQL with pgvector (HNSW graph, binary codes).

``tests/documents/test_recall.py`` runs in a child pytest against the private pgvector server of
:mod:`tests.documents.pgvector_server`, where its meaning queries walk the graph (checked) and,
for a scope that holds few of the query's neighbours, its binary codes. A file of its own, so
that it runs beside the other pgvector child runs. Runs in the PostgreSQL pass.
"""

from __future__ import annotations

import pytest

from tests.documents.pgvector_server import pgvector_url, run_on_pgvector

pytestmark = pytest.mark.postgres
__all__ = ["pgvector_url"]  # the fixture, imported for pytest


def test_meaning_search_recall_holds_on_a_real_pgvector_server(pgvector_url: str) -> None:
    run_on_pgvector(pgvector_url, "tests/documents/test_recall.py")
