"""SQLite's full-text index in its per-tenant shape (``documents.retrieval.schema``): its terms
carry their tenant and each tenant's counts are kept beside it, so full-text scores come from the
searching tenant's own rows. The index is made anew and filled from the entries (a pass over
the entry table; nothing else changes). Nothing to do on PostgreSQL, whose ranking counts per
tenant in its queries."""

from typing import Any

from django.db import migrations

from documents.retrieval.schema import drop_sqlite, ensure_lexical_index

# The shape this replaces (an FTS5 table over the entries' text, one vocabulary for all tenants),
# for going back.
TABLE = "documents_indexentry"
FTS = "documents_indexentry_fts"
PREVIOUS = [
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        search_text, content='{TABLE}', content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER {FTS}_ai AFTER INSERT ON {TABLE} BEGIN
        INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END""",
    f"""CREATE TRIGGER {FTS}_ad AFTER DELETE ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); END""",
    f"""CREATE TRIGGER {FTS}_au AFTER UPDATE OF search_text ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text);
        INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END""",
    f"CREATE VIRTUAL TABLE {FTS}_vocab USING fts5vocab({FTS}, 'row')",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]


def forward(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            drop_sqlite(cursor)
        ensure_lexical_index(connection, rebuild=True)


def backward(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            drop_sqlite(cursor)
            for statement in PREVIOUS:
                cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("documents", "0012_webhook_owner")]

    operations = [migrations.RunPython(forward, backward)]
