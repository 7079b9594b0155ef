"""The access-list tests again, on a real PostgreSQL with pgvector.

``tests/documents/test_access.py`` and its property-based test run in a child pytest against the
private pgvector server of :mod:`tests.documents.pgvector_server`: access lists inside pgvector's
queries. A file of its own, so that it runs beside the retrieval tests' child run. Runs in the
PostgreSQL pass.
"""

from __future__ import annotations

import pytest

from tests.documents.pgvector_server import pgvector_url, run_on_pgvector

pytestmark = pytest.mark.postgres
__all__ = ["pgvector_url"]  # the fixture, imported for pytest


def test_the_access_tests_pass_on_a_real_pgvector_server(pgvector_url: str) -> None:
    """Access lists inside pgvector's queries: every mode finds exactly what each user may see.
    A child of its own: these tests' transactional cases must not share a process (and its
    memory of the HNSW indexes made) with the retrieval tests'."""
    run_on_pgvector(pgvector_url, "tests/documents/test_access.py", "tests/documents/test_access_property.py")
