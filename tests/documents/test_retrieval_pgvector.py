"""The retrieval tests again, on a real PostgreSQL with pgvector (HNSW, iterative scans).

``tests/documents/test_retrieval.py``, the relevance thresholds and the centred codes
(``test_code_centres.py``) run in a child pytest against
the private pgvector server of :mod:`tests.documents.pgvector_server`. Runs in the PostgreSQL pass.
"""

from __future__ import annotations

import pytest

from tests.documents.pgvector_server import pgvector_url, run_on_pgvector

pytestmark = pytest.mark.postgres
__all__ = ["pgvector_url"]  # the fixture, imported for pytest


def test_the_retrieval_tests_pass_on_a_real_pgvector_server(pgvector_url: str) -> None:
    run_on_pgvector(
        pgvector_url,
        "tests/documents/test_retrieval.py",
        "tests/documents/test_relevance_modes.py",
        "tests/documents/test_code_centres.py",
    )
