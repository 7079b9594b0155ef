"""When a tenant outgrows the scope size PostgreSQL without pgvector ranks meaning within its
documented latency, ``manage.py check`` and the admin's health page say so (and recommend
pgvector); other databases, and tenants within the size, say nothing. The size is lowered here
to what a test ingests."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from documents.retrieval import index, pgvector
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload
from tests.ops.conftest import check_output, health_page

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "\n\n".join(f"Paragraph {i} of the harbor report: boats, weather and staff." * 20 for i in range(6))


@pytest.fixture
def ingested(settings, tmp_path: Path) -> int:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("bigco")
    result = upload(tenant, TEXT.encode(), "report.txt")
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    result.version.refresh_from_db()
    assert result.version.entries and result.version.entries > 1
    return int(result.version.entries)


def test_a_tenant_past_the_scope_size_is_flagged_where_meaning_search_has_that_limit(ingested, monkeypatch):
    plain = connection.vendor == "postgresql" and not pgvector.enabled(connection)
    monkeypatch.setattr(index.PostgresIndex, "scope_limit", ingested - 1)
    found, page = check_output(), health_page()
    if plain:
        assert "documents.W001" in found and "'bigco'" in found and "pgvector" in found
        assert "jobs-config-warning" in page and "bigco" in page and "pgvector" in page
    else:  # SQLite ranks exactly and pgvector has its own index: no such limit
        assert "documents.W001" not in found
        assert "bigco" not in page
    monkeypatch.setattr(index.PostgresIndex, "scope_limit", ingested)  # within the size: silence
    assert "documents.W001" not in check_output()
    assert "bigco" not in health_page()
