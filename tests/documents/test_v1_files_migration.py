"""The migration that makes every document a file of its collection's store: a document attached
through /v1 keeps its file object's id, batch and chunking; every other document gets a file id
of its own, so stores filled before the upgrade list all their documents.

PostgreSQL only: SQLite alters a table by copying it, and migrating it back rebuilds tables from
one migration's state; PostgreSQL alters in place.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [("documents", "0001_squashed")]
AFTER = [("documents", "0004_drop_vector_store_file")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to ``targets``; the models as the database now has them (read from every applied
    leaf, so other apps' migrations that stay applied are in the state too)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    loader = MigrationExecutor(connection).loader
    applied = {n for n in loader.applied_migrations if n in loader.graph.node_map}  # not replaced ones
    leaves = [n for n in applied if not any(c.key in applied for c in loader.graph.node_map[n].children)]
    return loader.project_state(leaves, at_end=True).apps


STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 20}}


def test_attached_and_plain_documents_all_become_files_of_their_store() -> None:
    try:
        old = migrate(BEFORE)

        def model(name: str) -> Any:
            return old.get_model("documents", name)

        tenant = model("Tenant").objects.create(slug="acme", name="Acme")
        store = model("Collection").objects.create(tenant=tenant, name="Store", is_default=True)
        attached, plain = (
            model("Document").objects.create(tenant=tenant, collection=store, title=t) for t in ("a", "p")
        )
        batch = model("VectorStoreFileBatch").objects.create(collection=store)
        model("VectorStoreFile").objects.create(
            collection=store, file_id="file-abc", document=attached, batch=batch, chunking_strategy=STATIC
        )

        new = migrate(AFTER)
        Document = new.get_model("documents", "Document")
        moved = Document.objects.get(pk=attached.pk)
        assert (moved.file_id, moved.file_batch_id, moved.chunking_strategy) == ("file-abc", batch.pk, STATIC)
        own = Document.objects.get(pk=plain.pk)
        assert own.file_id == f"file-{plain.pk.hex}" and own.chunking_strategy == {}
        assert "documents_vectorstorefile" not in connection.introspection.table_names()

        # Back again: every document is attached under the id it had.
        back = migrate(BEFORE).get_model("documents", "VectorStoreFile")
        links = dict(back.objects.values_list("document_id", "file_id"))
        assert links == {attached.pk: "file-abc", plain.pk: f"file-{plain.pk.hex}"}
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
