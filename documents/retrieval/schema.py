"""The full-text index beside ``IndexEntry``, which Django's model layer does not describe.

- SQLite: an FTS5 table over ``IndexEntry.search_text`` (external content: the text is stored
  once, in the entry) kept in step by triggers, so every way an entry goes (``remove_outputs``,
  a document's cascade delete) takes its full-text row with it in the same transaction.
- PostgreSQL: a generated ``tsvector`` column (``simple`` configuration: no stemming, since the
  search text is already normalised and holds CJK bigrams) with a GIN index; and, when the
  server offers pgvector, its column for vectors (``documents.retrieval.pgvector``).

Created by the migration ``0001_squashed`` and checked again after every ``migrate``: a
later migration that rebuilds the entry table on SQLite (Django copies it into a new table)
drops its triggers, and this puts them back and rebuilds the full-text rows.
"""

from __future__ import annotations

from typing import Any

TABLE = "documents_indexentry"
FTS = "documents_indexentry_fts"
TSV = "search_tsv"

SQLITE = [
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(
        search_text, content='{TABLE}', content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_ai AFTER INSERT ON {TABLE} BEGIN
        INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_ad AFTER DELETE ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_au AFTER UPDATE OF search_text ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text);
        INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END""",
]
SQLITE.append(f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS}_vocab USING fts5vocab({FTS}, 'row')")
SQLITE_TRIGGERS = {f"{FTS}_ai", f"{FTS}_ad", f"{FTS}_au"}

POSTGRES = [
    f"""ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {TSV} tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_tsv ON {TABLE} USING gin ({TSV})",
]


def ensure_lexical_index(connection: Any) -> None:
    """Create the full-text index (idempotent); on SQLite, restore lost triggers and rebuild."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [TABLE])
            missing = SQLITE_TRIGGERS - {row[0] for row in cursor.fetchall()}
            for statement in SQLITE:
                cursor.execute(statement)
            if missing:
                cursor.execute(f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')")
        elif connection.vendor == "postgresql":
            for statement in POSTGRES:
                cursor.execute(statement)
    if connection.vendor == "postgresql":
        from documents.retrieval import pgvector

        pgvector.ensure_schema(connection)


def drop_lexical_index(connection: Any) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for name in sorted(SQLITE_TRIGGERS):
                cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute(f"DROP TABLE IF EXISTS {FTS}_vocab")
            cursor.execute(f"DROP TABLE IF EXISTS {FTS}")
        elif connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {TSV}")


def on_post_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """``post_migrate`` receiver (documents app): keep the full-text index whole."""
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    connection = connections[using]
    recorder = MigrationRecorder(connection)
    if recorder.has_table() and recorder.migration_qs.filter(app="documents", name=MIGRATION).exists():
        ensure_lexical_index(connection)


MIGRATION = "0001_squashed"
