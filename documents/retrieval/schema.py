"""The full-text index beside ``IndexEntry``, which Django's model layer does not describe.

- SQLite: a contentless FTS5 table whose terms carry their tenant (``<tenant id>_<word>``): one
  table, but each tenant's words have posting lists and frequencies of their own, so a search
  reads and counts its own tenant's rows only (``documents.retrieval.sqlite_fts``). Beside it,
  each tenant's entry and term counts (the length statistics BM25 needs). Triggers on the entry
  table keep both in step, so every way an entry goes (``remove_outputs``, a document's or a
  tenant's cascade delete) takes its full-text row and its counts with it in the same
  transaction. A new tenant needs nothing: its first entry starts its terms and its counts.
- PostgreSQL: a generated ``tsvector`` column (``simple`` configuration: no stemming, since the
  search text is already normalised and holds CJK bigrams) with a GIN index; and, when the
  server offers pgvector, its column for vectors (``documents.retrieval.pgvector``). The GIN
  index takes each entry's words into its trees as the entry is written (``fastupdate`` off):
  with PostgreSQL's default the words wait in a pending list, up to 4 MB, until a vacuum, and
  every search reads that whole list for each of its words; the indexing stage's probe searches
  after every version, so during a bulk load the list never empties and each probe read all of
  it.

Created by the migration ``0001_squashed`` (on SQLite made over in this shape by
``0013_tenant_full_text``) and checked again after every ``migrate``: a later migration that
rebuilds the entry table on SQLite (Django copies it into a new table) drops its triggers, and
this puts them back and rebuilds the full-text rows and the counts.
"""

from __future__ import annotations

from typing import Any

TABLE = "documents_indexentry"
FTS = "documents_indexentry_fts"
# Each tenant's entries and the terms they hold: N and the average length of BM25.
STATS = f"{FTS}_stats"
TSV = "search_tsv"
# FTS5's own word rules (case folding, diacritics removed), plus "_" inside a term: it joins the
# tenant to the word. The search text never holds "_" (``documents.retrieval.text``).
TOKENIZE = "unicode61 remove_diacritics 2 tokenchars '_'"


def tenant_terms(tenant: str, text: str) -> str:
    """SQL for what the full-text row of an entry holds: each word of its ``text`` prefixed by
    its tenant's id (``tenant``, ``text``: SQL expressions of the entry's columns)."""
    prefixed = f"{tenant} || '_' || replace({text}, ' ', ' ' || {tenant} || '_')"
    return f"CASE WHEN {text} = '' THEN '' ELSE {prefixed} END"


def term_count(text: str) -> str:
    """SQL for how many words the search text ``text`` holds (they are single-space separated)."""
    return f"CASE WHEN {text} = '' THEN 0 ELSE length({text}) - length(replace({text}, ' ', '')) + 1 END"


def _add(row: str) -> str:
    return (
        f"INSERT INTO {STATS}(tenant_id, entries, terms) VALUES ({row}.tenant_id, 1, "
        f"{term_count(row + '.search_text')}) ON CONFLICT (tenant_id) DO UPDATE SET "
        "entries = entries + 1, terms = terms + excluded.terms;"
    )


def _remove(row: str) -> str:
    return (
        f"UPDATE {STATS} SET entries = entries - 1, terms = terms - {term_count(row + '.search_text')} "
        f"WHERE tenant_id = {row}.tenant_id;"
    )


def _fts_insert(row: str) -> str:
    return (
        f"INSERT INTO {FTS}(rowid, terms) VALUES "
        f"({row}.id, {tenant_terms(row + '.tenant_id', row + '.search_text')});"
    )


def _fts_delete(row: str) -> str:
    # A contentless table forgets a row by being told exactly what it held.
    return (
        f"INSERT INTO {FTS}({FTS}, rowid, terms) VALUES "
        f"('delete', {row}.id, {tenant_terms(row + '.tenant_id', row + '.search_text')});"
    )


SQLITE = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(terms, content='', tokenize=\"{TOKENIZE}\")",
    f"""CREATE TABLE IF NOT EXISTS {STATS} (
        tenant_id INTEGER PRIMARY KEY, entries INTEGER NOT NULL, terms INTEGER NOT NULL)""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_ai AFTER INSERT ON {TABLE} BEGIN
        {_fts_insert("new")} {_add("new")} END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_ad AFTER DELETE ON {TABLE} BEGIN
        {_fts_delete("old")} {_remove("old")} END""",
    f"""CREATE TRIGGER IF NOT EXISTS {FTS}_au AFTER UPDATE OF search_text, tenant_id ON {TABLE} BEGIN
        {_fts_delete("old")} {_remove("old")} {_fts_insert("new")} {_add("new")} END""",
    # Each term's rows (``doc``) in the whole table, and each occurrence of a term (``doc``,
    # ``offset``): with the tenant in the term, one tenant's frequencies and its rows' counts.
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS}_vocab USING fts5vocab({FTS}, 'row')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS}_instance USING fts5vocab({FTS}, 'instance')",
]
SQLITE_TRIGGERS = {f"{FTS}_ai", f"{FTS}_ad", f"{FTS}_au"}
SQLITE_REBUILD = [
    f"INSERT INTO {FTS}({FTS}) VALUES ('delete-all')",
    f"INSERT INTO {FTS}(rowid, terms) SELECT id, {tenant_terms('tenant_id', 'search_text')} FROM {TABLE}",
    f"DELETE FROM {STATS}",
    f"INSERT INTO {STATS}(tenant_id, entries, terms) SELECT tenant_id, count(*), "
    f"sum({term_count('search_text')}) FROM {TABLE} GROUP BY tenant_id",
]

POSTGRES = [
    f"""ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS {TSV} tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_tsv ON {TABLE} USING gin ({TSV}) WITH (fastupdate = off)",
    # An index made before it had no such setting: a search then reads the whole list of entries
    # written since the last vacuum, one by one, for each of its words.
    f"ALTER INDEX {TABLE}_tsv SET (fastupdate = off)",
    f"SELECT gin_clean_pending_list('{TABLE}_tsv'::regclass)",
]


def ensure_lexical_index(connection: Any, *, rebuild: bool = False) -> None:
    """Create the full-text index (idempotent); on SQLite, restore lost triggers and rebuild the
    full-text rows and counts from the entries (also when ``rebuild`` asks for it)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [TABLE])
            missing = SQLITE_TRIGGERS - {row[0] for row in cursor.fetchall()}
            for statement in SQLITE:
                cursor.execute(statement)
            if missing or rebuild:
                for statement in SQLITE_REBUILD:
                    cursor.execute(statement)
        elif connection.vendor == "postgresql":
            for statement in POSTGRES:
                cursor.execute(statement)
    if connection.vendor == "postgresql":
        from documents.retrieval import pgvector

        pgvector.ensure_schema(connection)


def drop_lexical_index(connection: Any) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            drop_sqlite(cursor)
        elif connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {TSV}")


def drop_sqlite(cursor: Any) -> None:
    """Drop SQLite's full-text index, in this shape or an earlier one (same names)."""
    for name in sorted(SQLITE_TRIGGERS):
        cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
    for name in (f"{FTS}_vocab", f"{FTS}_instance", FTS, STATS):
        cursor.execute(f"DROP TABLE IF EXISTS {name}")


def on_post_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """``post_migrate`` receiver (documents app): keep the full-text index whole."""
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    connection = connections[using]
    recorder = MigrationRecorder(connection)
    if recorder.has_table() and recorder.migration_qs.filter(app="documents", name=MIGRATION).exists():
        ensure_lexical_index(connection)


# The migration after which the index has its current shape on both databases.
MIGRATION = "0013_tenant_full_text"
