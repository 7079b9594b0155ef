"""The two reads every polled status request makes, as SQL built once per process.

``GET /api/documents/{id}/jobs/{job_id}`` (and its SSE stream's first look) authenticates a token
and reads the version with its job. Through the ORM each of those two queries spent more time in
Python (compiling a three-table join, every request) than the database took to answer it
(bench/README.md, "Speed where users feel it"). Here each query's text is built once
from the models' own metadata (so a new column is picked up without editing SQL), values go in
as parameters, and rows come back as ordinary model instances through the same converters the
ORM applies. On PostgreSQL they run on a server-binding cursor, so psycopg prepares each after its
first few runs on a connection and the server stops planning them anew: planning the version read
with its access condition took longer than running it (bench/README.md). The conditions are
exactly those of the ORM queries they replace: the tenant isolation of
:func:`documents.selectors.access_version_by_job` and the token lookup of
:func:`documents.api.auth.user_for_token` (tests/api/test_hot_reads.py compares them).
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from rest_framework.authtoken.models import Token

from documents.models import Document, DocumentGrant, DocumentVersion, Membership, Tenant, WorkspaceGroup
from documents.principals import EVERYONE, VIEW_ALL, Viewer, user_key
from jobs.models import Job


class _Part:
    """One model's columns in a joined SELECT: where they sit in the row, and how to read them."""

    def __init__(self, model: type[models.Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields = tuple(model._meta.concrete_fields)
        self.columns = tuple(field.get_col(alias) for field in self.fields)
        self.names = tuple(field.attname for field in self.fields)
        self.pk_index = self.fields.index(model._meta.pk)
        self.start = 0
        self._converters: list[tuple[int, Any, list[Any]]] | None = None

    def converters(self, conn: Any) -> list[tuple[int, Any, list[Any]]]:
        """``(index, column, converters)`` of the columns that need any: the ORM's own conversions
        (datetimes and UUIDs on SQLite, JSON, ...), backend first. They depend on the field and
        the backend only, so they are looked up once (per query, which is per vendor)."""
        if self._converters is None:
            found = []
            for i, column in enumerate(self.columns):
                converters = conn.ops.get_db_converters(column) + column.get_db_converters(conn)
                if converters:
                    found.append((i, column, converters))
            self._converters = found
        return self._converters

    def select(self, start: int) -> str:
        self.start = start
        quote = connection.ops.quote_name
        return ", ".join(f"{quote(self.alias)}.{quote(str(f.column))}" for f in self.fields)

    def instance(self, row: tuple[Any, ...]) -> Any:
        """The model instance for this part of ``row`` (None when a LEFT JOIN found nothing)."""
        values = list(row[self.start : self.start + len(self.fields)])
        if values[self.pk_index] is None:
            return None
        conn = connections[DEFAULT_DB_ALIAS]  # the thread's wrapper, looked up once per row
        for i, column, converters in self.converters(conn):
            for convert in converters:
                values[i] = convert(values[i], column, conn)
        return self.model.from_db(conn.alias, self.names, values)


def _cursor() -> Any:
    """A cursor for the hot reads. On PostgreSQL with prepared statements on (``prepare_threshold``
    in the connection's options, ``DB_PREPARED_STATEMENTS``), one that binds parameters on the
    server, which psycopg prepares once a query has run that many times on the connection, so
    later runs skip the planner (the connection, and with it the statement, outlives the request
    in the pool or with ``CONN_MAX_AGE``). The ORM's own cursors bind on the client and are never
    prepared. Wrapped like any Django cursor: query logging and error translation are the same."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    if connection.connection.prepare_threshold is None:
        return connection.cursor()
    from django.db.backends.postgresql.base import ServerBindingCursor

    binding: Any = ServerBindingCursor
    with connection.wrap_database_errors:
        raw = binding(connection.connection)
    # As connection.cursor() wraps its own: logged where queries are logged, errors translated.
    connection.validate_thread_sharing()
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


def _joined(parts: list[_Part], tail: str) -> str:
    selected, start = [], 0
    for part in parts:
        selected.append(part.select(start))
        start += len(part.fields)
    return f"SELECT {', '.join(selected)} {tail}"


def _table(model: type[models.Model], alias: str) -> str:
    quote = connection.ops.quote_name
    return f"{quote(model._meta.db_table)} {quote(alias)}"


def _col(alias: str, model: type[models.Model], name: str) -> str:
    quote = connection.ops.quote_name
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field)  # a concrete column, not a reverse relation
    return f"{quote(alias)}.{quote(str(field.column))}"


@cache
def _token_query(vendor: str) -> tuple[str, _Part, _Part, _Part]:
    user_model = get_user_model()
    token, user, tenant = _Part(Token, "t"), _Part(user_model, "u"), _Part(Tenant, "w")
    user_id = _col("u", user_model, "id")
    # A user has at most one membership (a unique constraint): LEFT JOINs answer one row either
    # way, with no tenant for a user in no workspace (refused 403 later, as before).
    tail = (
        f"FROM {_table(Token, 't')} "
        f"INNER JOIN {_table(user_model, 'u')} ON {user_id} = {_col('t', Token, 'user')} "
        f"LEFT JOIN {_table(Membership, 'm')} ON {_col('m', Membership, 'user')} = {user_id} "
        f"LEFT JOIN {_table(Tenant, 'w')} ON {_col('w', Tenant, 'id')} = {_col('m', Membership, 'tenant')} "
        f"WHERE {_col('t', Token, 'key')} = %s"
    )
    return _joined([token, user, tenant], tail), token, user, tenant


def token_owner(key: str) -> tuple[Any, Token, Tenant | None] | None:
    """``(user, token, tenant or None)`` for the token ``key``, in one query; None if no such token."""
    sql, token_part, user_part, tenant_part = _token_query(connection.vendor)
    with _cursor() as cursor:
        cursor.execute(sql, [key])
        row = cursor.fetchone()
    if row is None:
        return None
    token, user = token_part.instance(row), user_part.instance(row)
    token.user = user
    return user, token, tenant_part.instance(row)


@cache
def _version_query(vendor: str) -> tuple[str, _Part, _Part]:
    version, job = _Part(DocumentVersion, "v"), _Part(Job, "j")
    v_document = _col("v", DocumentVersion, "document")
    # The version whose job is the given one, of the given document of the given tenant, neither
    # deleted: another tenant's ids find no row, exactly as ids that do not exist.
    tail = (
        f"FROM {_table(DocumentVersion, 'v')} "
        f"INNER JOIN {_table(Document, 'd')} ON {_col('d', Document, 'id')} = {v_document} "
        f"INNER JOIN {_table(Job, 'j')} ON {_col('j', Job, 'id')} = {_col('v', DocumentVersion, 'job')} "
        f"WHERE {_col('d', Document, 'tenant')} = %s AND {v_document} = %s "
        f"AND {_col('v', DocumentVersion, 'job')} = %s "
        f"AND {_col('v', DocumentVersion, 'deleted_at')} IS NULL "
        f"AND {_col('d', Document, 'deleted_at')} IS NULL"
    )
    return _joined([version, job], tail), version, job


@cache
def _visible_condition(vendor: str) -> str:
    """Document ``d`` is visible to a user in a workspace (params: is superuser, user id twice,
    the user's key, user id, tenant id), as ``documents.selectors.visible_documents`` decides
    with ``viewer_for``'s keys and ``view_all_documents``, but read inside the one query."""
    user_model = get_user_model()
    user_groups = user_model.groups.through
    user_perms = user_model.user_permissions.through
    group_perms = Group.permissions.through
    ug_group, ug_user = _col("ug", user_groups, "group"), _col("ug", user_groups, "user")
    sees_all = (
        f"EXISTS (SELECT 1 FROM {_table(Permission, 'p')} "
        f"INNER JOIN {_table(ContentType, 'ct')} ON {_col('ct', ContentType, 'id')} = "
        f"{_col('p', Permission, 'content_type')} "
        f"WHERE {_col('ct', ContentType, 'app_label')} = 'documents' "
        f"AND {_col('p', Permission, 'codename')} = '{VIEW_ALL.split('.')[1]}' "
        f"AND ({_col('p', Permission, 'id')} IN (SELECT {_col('up', user_perms, 'permission')} "
        f"FROM {_table(user_perms, 'up')} WHERE {_col('up', user_perms, 'user')} = %s) "
        f"OR {_col('p', Permission, 'id')} IN (SELECT {_col('gp', group_perms, 'permission')} "
        f"FROM {_table(group_perms, 'gp')} INNER JOIN {_table(user_groups, 'ug')} "
        f"ON {ug_group} = {_col('gp', group_perms, 'group')} WHERE {ug_user} = %s)))"
    )
    principal = _col("g", DocumentGrant, "principal")
    granted = (
        f"EXISTS (SELECT 1 FROM {_table(DocumentGrant, 'g')} "
        f"WHERE {_col('g', DocumentGrant, 'document')} = {_col('d', Document, 'id')} "
        f"AND ({principal} IN ('{EVERYONE}', %s) "
        f"OR {principal} IN (SELECT 'group:' || CAST({ug_group} AS TEXT) FROM {_table(user_groups, 'ug')} "
        f"INNER JOIN {_table(WorkspaceGroup, 'wg')} ON {_col('wg', WorkspaceGroup, 'group')} = {ug_group} "
        f"WHERE {ug_user} = %s AND {_col('wg', WorkspaceGroup, 'tenant')} = %s)))"
    )
    return f" AND (%s OR {sees_all} OR {granted})"


def version_with_job(
    tenant_id: Any, document_id: uuid.UUID, job_id: uuid.UUID, *, visible_to: Viewer | None = None
) -> DocumentVersion | None:
    """The version whose job is ``job_id`` (job loaded with it), if that job belongs to document
    ``document_id`` of tenant ``tenant_id`` and, with ``visible_to``, that caller may see the
    document; otherwise None."""
    sql, version_part, job_part = _version_query(connection.vendor)
    params = [
        Document._meta.get_field("tenant").get_db_prep_value(tenant_id, connection),
        Document._meta.pk.get_db_prep_value(document_id, connection),
        Job._meta.pk.get_db_prep_value(job_id, connection),
    ]
    if visible_to is not None and visible_to.user_id is not None:
        user_id = visible_to.user_id
        sql += _visible_condition(connection.vendor)
        params += [visible_to.sees_all_already, user_id, user_id, user_key(user_id), user_id, tenant_id]
    with _cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    version: DocumentVersion = version_part.instance(row)
    version.job = job_part.instance(row)
    return version
