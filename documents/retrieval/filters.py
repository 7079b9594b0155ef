"""Search filters over document attributes, in the OpenAI vector-store filter shape.

A filter is a comparison ``{"type": "eq|ne|gt|gte|lt|lte|in|nin", "key": "...", "value": ...}`` or
a compound ``{"type": "and|or", "filters": [...]}`` (nested up to ``MAX_DEPTH`` levels, at most
``MAX_CONDITIONS`` comparisons, lists of at most ``MAX_LIST_VALUES`` values).

``parse_filter`` turns the JSON into a small typed tree or raises ``FilterError`` naming the offending
path (``filters.filters[1].value``). ``filter_sql`` renders the tree as a parameterised WHERE fragment
over a JSON column of attributes, for SQLite (``json_extract``/``json_type``) and PostgreSQL (jsonb
operators), so filters run inside the index query, never after it.

Semantics (the same on both backends, tested on both):

- Comparisons are typed by the filter's value: a number matches only numbers (compared as numbers),
  a boolean only booleans, a string only strings. A ``YYYY-MM-DD`` value is a date: ``gt/gte/lt/lte``
  with a date match only date attributes, compared chronologically (ISO text order). Strings compare
  by code point on both backends (PostgreSQL uses ``COLLATE "C"``).
- ``eq``/``in``/``gt``/``gte``/``lt``/``lte`` never match a document that lacks the key, nor one whose
  value has another type. ``ne`` and ``nin`` are their exact negations: they *do* match a document
  that lacks the key or holds another type ("not equal to 5" is true of a document with no value).
- ``gt/gte/lt/lte`` take a number, a date or a string, never a boolean; ``in/nin`` take a non-empty
  list of values; the others a single value.

Keys follow ``documents.attributes.KEY_PATTERN``; keys and values always travel as query
parameters, never inside the SQL text.
"""

# long-module: the filter language in one read: its parser, its typed semantics and their SQL on
# two databases, which must agree clause by clause.

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast, get_args

from documents.attributes import KEY_PATTERN, Scalar, ValueProblem, check_value, is_valid_key
from documents.texts import Text, gettext_noop

ComparisonType = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
CompoundType = Literal["and", "or"]

COMPARISON_TYPES: tuple[str, ...] = get_args(ComparisonType)
COMPOUND_TYPES: tuple[str, ...] = get_args(CompoundType)
RANGE_TYPES = ("gt", "gte", "lt", "lte")
LIST_TYPES = ("in", "nin")

MAX_DEPTH = 5
MAX_CONDITIONS = 64
MAX_LIST_VALUES = 100


class FilterError(ValueError):
    """A filter that cannot be run: ``field`` is the path of the offending part, ``message`` is safe
    to show to the user (it never repeats the submitted value), in English: an edge that shows it
    says it in the reader's language with ``documents.texts.localize``."""

    code = "invalid_filter"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Comparison:
    type: ComparisonType
    key: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Compound:
    type: CompoundType
    filters: tuple[Filter, ...]


Filter: TypeAlias = Comparison | Compound
SqlParam: TypeAlias = str | int | float  # what the fragment's %s placeholders receive


# -- parsing ------------------------------------------------------------------------------------


def parse_filter(obj: object, *, field: str = "filters") -> Filter:
    """Validate a filter given as decoded JSON and return its typed tree.

    ``field`` is the name of the request field holding it; error paths start there.
    """
    counter = [0]
    return _parse(obj, field, 1, counter)


def parse_filter_json(text: str | bytes, *, field: str = "filters") -> Filter:
    """``parse_filter`` for a filter sent as JSON text (e.g. in a query-string parameter)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise FilterError(field, gettext_noop("Must be a JSON object.")) from None
    return parse_filter(obj, field=field)


def _parse(obj: object, path: str, depth: int, counter: list[int]) -> Filter:
    if not isinstance(obj, dict):
        raise FilterError(path, gettext_noop("Must be an object with a 'type'."))
    kind = obj.get("type")
    if kind in COMPOUND_TYPES:
        return _parse_compound(obj, cast(CompoundType, kind), path, depth, counter)
    if kind in COMPARISON_TYPES:
        return _parse_comparison(obj, cast(ComparisonType, kind), path, counter)
    allowed = ", ".join(COMPARISON_TYPES + COMPOUND_TYPES)
    raise FilterError(f"{path}.type", Text(gettext_noop("Must be one of: %(allowed)s."), allowed=allowed))


def _reject_extra(obj: dict[str, Any], allowed: set[str], path: str) -> None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        name = extra[0] if is_valid_key(extra[0]) else "?"
        expected = ", ".join(sorted(allowed))
        raise FilterError(
            f"{path}.{name}",
            Text(gettext_noop("Unknown field; expected only: %(expected)s."), expected=expected),
        )


def _parse_compound(
    obj: dict[str, Any], kind: CompoundType, path: str, depth: int, counter: list[int]
) -> Compound:
    _reject_extra(obj, {"type", "filters"}, path)
    if depth > MAX_DEPTH:
        raise FilterError(
            path, Text(gettext_noop("Filters nest at most %(depth)s levels deep."), depth=MAX_DEPTH)
        )
    children = obj.get("filters")
    if not isinstance(children, list) or not children:
        raise FilterError(f"{path}.filters", gettext_noop("Must be a non-empty list of filters."))
    parsed = tuple(
        _parse(child, f"{path}.filters[{i}]", depth + 1, counter) for i, child in enumerate(children)
    )
    return Compound(type=kind, filters=parsed)


def _parse_comparison(obj: dict[str, Any], kind: ComparisonType, path: str, counter: list[int]) -> Comparison:
    _reject_extra(obj, {"type", "key", "value"}, path)
    counter[0] += 1
    if counter[0] > MAX_CONDITIONS:
        message = Text(gettext_noop("A filter holds at most %(count)s comparisons."), count=MAX_CONDITIONS)
        raise FilterError(path, message)
    key = obj.get("key")
    if not is_valid_key(key):
        message = Text(gettext_noop("Must be an attribute name matching %(pattern)s."), pattern=KEY_PATTERN)
        raise FilterError(f"{path}.key", message)
    if "value" not in obj:
        raise FilterError(f"{path}.value", gettext_noop("This field is required."))
    raw = obj["value"]
    vpath = f"{path}.value"
    if kind in LIST_TYPES:
        if not isinstance(raw, list) or not raw:
            raise FilterError(
                vpath, Text(gettext_noop("'%(type)s' takes a non-empty list of values."), type=kind)
            )
        if len(raw) > MAX_LIST_VALUES:
            raise FilterError(
                vpath, Text(gettext_noop("A list holds at most %(count)s values."), count=MAX_LIST_VALUES)
            )
        values = tuple(_scalar(item, f"{vpath}[{i}]") for i, item in enumerate(raw))
        return Comparison(type=kind, key=cast(str, key), value=values)
    if isinstance(raw, list):
        message = Text(gettext_noop("'%(type)s' takes one value; use 'in' or 'nin' for a list."), type=kind)
        raise FilterError(vpath, message)
    value = _scalar(raw, vpath)
    if kind in RANGE_TYPES and isinstance(value, bool):
        message = Text(
            gettext_noop("'%(type)s' compares numbers, dates or strings, not booleans."), type=kind
        )
        raise FilterError(vpath, message)
    return Comparison(type=kind, key=cast(str, key), value=value)


def _scalar(raw: object, path: str) -> Scalar:
    try:
        check_value(raw)
    except ValueProblem as problem:
        raise FilterError(path, problem.message) from None
    return cast(Scalar, raw)


# -- SQL ------------------------------------------------------------------------------------------

# A column reference such as ``attributes``, ``d.attributes`` or ``"documents_document"."attributes"``.
_IDENT = r'(?:[A-Za-z_][A-Za-z0-9_]*|"[A-Za-z_][A-Za-z0-9_]*")'
_COLUMN_RE = re.compile(rf"{_IDENT}(?:\.{_IDENT})*")


def filter_sql(f: Filter, vendor: str, column: str) -> tuple[str, list[SqlParam]]:
    """Render ``f`` as a WHERE fragment over the JSON ``column`` and its parameters.

    ``vendor`` is ``connection.vendor`` ("sqlite" or "postgresql"; there ``column`` must be jsonb).
    Placeholders are ``%s``, as Django's cursors take them on both backends. The fragment is a
    boolean expression that can be ANDed with the rest of a query.
    """
    if not _COLUMN_RE.fullmatch(column):
        raise ValueError("column must be a plain (optionally qualified) column reference")
    render: _Dialect
    if vendor == "sqlite":
        render = _SQLite(column)
    elif vendor == "postgresql":
        render = _Postgres(column)
    else:
        raise ValueError(f"no attribute filters for database vendor {vendor!r}")
    params: list[SqlParam] = []
    sql = _render(f, render, params)
    return sql, params


class _Dialect:
    """How one backend says "this comparison holds" (positively; negation is generic)."""

    false = "FALSE"

    def __init__(self, column: str) -> None:
        self.c = column

    def equal_any(self, key: str, values: Sequence[Scalar], params: list[SqlParam]) -> str:
        raise NotImplementedError

    def ordered(self, key: str, op: str, value: Scalar, params: list[SqlParam]) -> str:
        raise NotImplementedError


_SQL_OPS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _render(f: Filter, d: _Dialect, params: list[SqlParam]) -> str:
    if isinstance(f, Compound):
        joiner = " AND " if f.type == "and" else " OR "
        return "(" + joiner.join(_render(child, d, params) for child in f.filters) + ")"
    if f.type in RANGE_TYPES:
        return d.ordered(f.key, _SQL_OPS[f.type], cast(Scalar, f.value), params)
    values = f.value if isinstance(f.value, tuple) else (f.value,)
    positive = d.equal_any(f.key, values, params)
    if f.type in ("ne", "nin"):
        # The positive test is NULL for a missing key; NOT NULL would hide the document again.
        return f"(NOT COALESCE({positive}, {d.false}))"
    return positive


def _by_kind(values: Sequence[Scalar]) -> tuple[list[str], list[int | float], list[bool]]:
    strings: list[str] = []
    numbers: list[int | float] = []
    booleans: list[bool] = []
    for v in values:
        if isinstance(v, bool):
            booleans.append(v)
        elif isinstance(v, str):
            strings.append(v)
        else:
            numbers.append(v)
    return strings, numbers, booleans


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


class _SQLite(_Dialect):
    false = "0"
    # ISO dates only: shaped YYYY-MM-DD (the attribute service checks they are real dates).
    _DATE_GLOB = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'"

    @staticmethod
    def _path(key: str) -> str:
        # Quoted member name: keys may hold '.' or '-'; KEY_PATTERN excludes '"' and '\'.
        return f'$."{key}"'

    def equal_any(self, key: str, values: Sequence[Scalar], params: list[SqlParam]) -> str:
        path, c = self._path(key), self.c
        strings, numbers, booleans = _by_kind(values)
        parts = []
        if strings:
            parts.append(
                f"(json_type({c}, %s) = 'text' AND json_extract({c}, %s) IN ({_placeholders(len(strings))}))"
            )
            params += [path, path, *strings]
        if numbers:
            parts.append(
                f"(json_type({c}, %s) IN ('integer', 'real') "
                f"AND json_extract({c}, %s) IN ({_placeholders(len(numbers))}))"
            )
            params += [path, path, *numbers]
        if booleans:
            parts.append(f"(json_type({c}, %s) IN ({_placeholders(len(booleans))}))")
            params += [path, *("true" if b else "false" for b in booleans)]
        return "(" + " OR ".join(parts) + ")"

    def ordered(self, key: str, op: str, value: Scalar, params: list[SqlParam]) -> str:
        path, c = self._path(key), self.c
        if isinstance(value, str):
            date_only = check_value(value) == "date"
            sql = f"(json_type({c}, %s) = 'text' AND json_extract({c}, %s) {op} %s"
            params += [path, path, value]
            if date_only:
                sql += f" AND json_extract({c}, %s) GLOB {self._DATE_GLOB}"
                params.append(path)
            return sql + ")"
        params += [path, path, value]
        return f"(json_type({c}, %s) IN ('integer', 'real') AND json_extract({c}, %s) {op} %s)"


class _Postgres(_Dialect):
    _DATE_RE = "'^[0-9]{4}-[0-9]{2}-[0-9]{2}$'"

    def equal_any(self, key: str, values: Sequence[Scalar], params: list[SqlParam]) -> str:
        # Containment (@>) is jsonb-typed equality (1 = 1.0, "1" <> 1) and can use a GIN index.
        parts = []
        for v in values:
            parts.append(f"({self.c} @> %s::jsonb)")
            params.append(json.dumps({key: v}))
        return "(" + " OR ".join(parts) + ")"

    def ordered(self, key: str, op: str, value: Scalar, params: list[SqlParam]) -> str:
        c = self.c
        if isinstance(value, str):
            # COLLATE "C": code-point order, as SQLite's BINARY; and dates' ISO text order.
            sql = f"(jsonb_typeof({c} -> %s::text) = 'string' AND ({c} ->> %s::text) COLLATE \"C\" {op} %s"
            params += [key, key, value]
            if check_value(value) == "date":
                sql += f" AND ({c} ->> %s::text) ~ {self._DATE_RE}"
                params.append(key)
            return sql + ")"
        # jsonb's own ordering compares numbers numerically and never raises on other types.
        params += [key, key, json.dumps(value)]
        return f"(jsonb_typeof({c} -> %s::text) = 'number' AND ({c} -> %s::text) {op} %s::jsonb)"
