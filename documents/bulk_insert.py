"""Batch inserts of a stage's output rows (pages, chunks, vectors, index entries) in one statement.

``bulk_create`` builds a model instance per row, prepares every value through its field and, on
PostgreSQL, spells every value into the SQL text (Django binds parameters on the client): a batch
of 64 vectors of 1,024 dimensions becomes half a megabyte of hex the server parses again. Here the
rows go as they are:

- PostgreSQL: ``INSERT ... SELECT FROM unnest(%s::type[], ...)``, one array parameter per column,
  bound by the server (psycopg's own cursor on Django's connection: bytea travels as binary);
  one statement and one round trip per batch, whatever its size.
- SQLite: ``executemany`` of one prepared ``INSERT``.

Both run on Django's connection and inside the caller's transaction (a stage's fenced write), and
through Django's cursor wrapper, so query capture and execute wrappers see them like any other.
``skip_existing`` keeps rows already there (``ON CONFLICT DO NOTHING`` / ``INSERT OR IGNORE``, what
``bulk_create(ignore_conflicts=True)`` sends): a batch replayed after a lost commit answer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, models


def insert_rows(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    skip_existing: bool = False,
    extra: Sequence[tuple[str, str, str]] = (),
    on_conflict: str = "",
) -> None:
    """Insert ``rows`` (values in ``fields``' order; foreign keys by their ``attname``, e.g.
    ``version_id``) into ``model``'s table.

    ``extra`` (PostgreSQL only) adds columns the model does not describe, each as ``(column,
    array element type, expression)`` with ``{}`` in the expression standing for the value, e.g.
    ``("embedding", "text", "{}::vector")``; their values follow the fields' in each row.
    ``on_conflict`` (PostgreSQL only) replaces ``skip_existing``'s ``ON CONFLICT DO NOTHING``.
    """
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns: list[Any] = [model._meta.get_field(name) for name in fields]  # concrete fields
    if connection.vendor == "postgresql":
        conflict = on_conflict or ("ON CONFLICT DO NOTHING" if skip_existing else "")
        _insert_postgres(table, columns, rows, conflict, extra)
        return
    if extra or on_conflict:
        raise ValueError("extra columns and conflict clauses are PostgreSQL's")
    names = ", ".join(connection.ops.quote_name(c.column) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    verb = "INSERT OR IGNORE" if skip_existing else "INSERT"
    convert = [_sqlite_value(c) for c in columns]
    values = [tuple(f(v) for f, v in zip(convert, row, strict=True)) for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(f"{verb} INTO {table} ({names}) VALUES ({marks})", values)


def _insert_postgres(
    table: str,
    columns: Sequence[Any],
    rows: Sequence[Sequence[Any]],
    conflict: str,
    extra: Sequence[tuple[str, str, str]],
) -> None:
    names, arrays, selects = [], [], []
    for position, field in enumerate(columns):
        names.append(connection.ops.quote_name(field.column))
        if isinstance(field, models.JSONField):  # sent as text, read back by PostgreSQL
            arrays.append("%s::text[]")
            selects.append(f"u.c{position}::jsonb")
        else:
            arrays.append(f"%s::{field.db_type(connection)}[]")
            selects.append(f"u.c{position}")
    for offset, (column, element, expression) in enumerate(extra, start=len(columns)):
        names.append(connection.ops.quote_name(column))
        arrays.append(f"%s::{element}[]")
        selects.append(expression.format(f"u.c{offset}"))
    aliases = ", ".join(f"c{i}" for i in range(len(names)))
    sql = (
        f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(selects)} "
        f"FROM unnest({', '.join(arrays)}) AS u({aliases})"
    )
    if conflict:
        sql += " " + conflict
    params: list[list[Any]] = [[] for _ in names]
    json_at = {i for i, f in enumerate(columns) if isinstance(f, models.JSONField)}
    for row in rows:
        for i, value in enumerate(row):
            params[i].append(json.dumps(value) if i in json_at else value)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)


@contextmanager
def server_bound_cursor() -> Iterator[Any]:
    """A cursor on Django's PostgreSQL connection whose parameters the server binds (Django's
    own binds them into the SQL text), wrapped like Django's cursors (errors, query capture)."""
    import psycopg

    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    raw: Any = psycopg.Cursor(connection.connection)
    cursor = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    try:
        yield cursor
    finally:
        raw.close()


def _sqlite_value(field: Any) -> Any:
    """How SQLite stores ``field``'s values as Django writes them."""
    target = field.target_field if field.is_relation else field
    if isinstance(target, models.UUIDField):
        return lambda v: v.hex if isinstance(v, uuid.UUID) else v
    if isinstance(field, models.JSONField):
        return json.dumps
    return lambda v: v
