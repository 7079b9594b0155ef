"""The access migration: documents and collections that exist before it stay visible to everyone
in their workspace (the collection's list is "everyone", each document inherits it and has that
grant).

PostgreSQL only, like the other migration tests: SQLite alters a table by copying it.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.documents.test_v1_files_migration import migrate

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [("documents", "0010_reindex_permission")]
AFTER = [("documents", "0011_document_access")]


def test_existing_documents_stay_visible_to_everyone_in_their_workspace() -> None:
    try:
        old = migrate(BEFORE)
        tenant = old.get_model("documents", "Tenant").objects.create(slug="acme", name="Acme")
        store = old.get_model("documents", "Collection").objects.create(tenant=tenant, name="Store")
        documents = [
            old.get_model("documents", "Document").objects.create(tenant=tenant, collection=store, title=t)
            for t in ("a", "b")
        ]

        new = migrate(AFTER)
        assert new.get_model("documents", "Collection").objects.get(pk=store.pk).access == ["everyone"]
        Document = new.get_model("documents", "Document")
        assert [Document.objects.get(pk=d.pk).access for d in documents] == [None, None]
        grants = new.get_model("documents", "DocumentGrant").objects.values_list("document_id", "principal")
        assert sorted(grants) == sorted((d.pk, "everyone") for d in documents)
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
