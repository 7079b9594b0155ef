"""The collections migration: each tenant with documents gets one default collection holding
all of them; tenants without documents get theirs on first need. Runs on both databases."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("documents", "0006_merge_retrieval_lifecycle")]
AFTER = [("documents", "0008_document_collection_required")]


def migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def test_existing_documents_move_into_one_default_collection_per_tenant():
    old = migrate(BEFORE).loader.project_state(BEFORE).apps
    Tenant, Document = old.get_model("documents", "Tenant"), old.get_model("documents", "Document")
    acme, globex = (
        Tenant.objects.create(slug="acme", name="Acme"),
        Tenant.objects.create(slug="globex", name="G"),
    )
    Tenant.objects.create(slug="empty", name="Empty")
    for tenant, n in ((acme, 3), (globex, 1)):
        for i in range(n):
            Document.objects.create(tenant=tenant, title=f"doc {i}")
    try:
        new = migrate(AFTER).loader.project_state(AFTER).apps
        Collection, Moved = new.get_model("documents", "Collection"), new.get_model("documents", "Document")
        defaults = {c.tenant.slug: c for c in Collection.objects.select_related("tenant")}
        assert set(defaults) == {"acme", "globex"} and all(c.is_default for c in defaults.values())
        assert Moved.objects.filter(collection=defaults["acme"]).count() == 3
        assert Moved.objects.filter(collection=defaults["globex"]).count() == 1
        assert not Moved.objects.filter(collection__isnull=True).exists()
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # back to the latest schema
