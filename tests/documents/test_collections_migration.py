"""The collections migration: each tenant with documents gets one default collection holding
all of them; tenants without documents get theirs on first need.

PostgreSQL only: the migration graph has merged lines, and migrating SQLite back across them
rebuilds a table from one line's state (SQLite alters tables by copying them), dropping a column
another line added; PostgreSQL alters in place.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [("documents", "0006_merge_retrieval_lifecycle")]
AFTER = [("documents", "0008_document_collection_required")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to ``targets``; the models as the database now has them. Sibling branches of the
    graph (other apps' and this app's merged lines) stay applied, so the state is read from every
    applied leaf, not from ``targets`` alone (whose state would lack their NOT NULL columns)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    loader = MigrationExecutor(connection).loader
    applied = set(loader.applied_migrations)
    leaves = [n for n in applied if not any(c.key in applied for c in loader.graph.node_map[n].children)]
    return loader.project_state(leaves, at_end=True).apps


def test_existing_documents_move_into_one_default_collection_per_tenant():
    try:
        old = migrate(BEFORE)
        Tenant, Document = old.get_model("documents", "Tenant"), old.get_model("documents", "Document")
        acme, globex = (
            Tenant.objects.create(slug="acme", name="Acme"),
            Tenant.objects.create(slug="globex", name="G"),
        )
        Tenant.objects.create(slug="empty", name="Empty")
        for tenant, n in ((acme, 3), (globex, 1)):
            for i in range(n):
                Document.objects.create(tenant=tenant, title=f"doc {i}")
        new = migrate(AFTER)
        Collection, Moved = new.get_model("documents", "Collection"), new.get_model("documents", "Document")
        defaults = {c.tenant.slug: c for c in Collection.objects.select_related("tenant")}
        assert set(defaults) == {"acme", "globex"} and all(c.is_default for c in defaults.values())
        assert Moved.objects.filter(collection=defaults["acme"]).count() == 3
        assert Moved.objects.filter(collection=defaults["globex"]).count() == 1
        assert not Moved.objects.filter(collection__isnull=True).exists()
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
