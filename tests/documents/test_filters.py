"""Attribute filters: parsing (pure) and the SQL they render, run on the real database of the pass
(SQLite in the SQLite pass, PostgreSQL jsonb in the PostgreSQL pass) over a small table of attributes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from documents.retrieval.filters import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    MAX_LIST_VALUES,
    Comparison,
    Compound,
    FilterError,
    filter_sql,
    parse_filter,
    parse_filter_json,
)

# --- parsing -------------------------------------------------------------------------------------


def test_comparison_parses_into_typed_node():
    assert parse_filter({"type": "eq", "key": "dept", "value": "sales"}) == Comparison("eq", "dept", "sales")


def test_list_values_become_a_tuple():
    parsed = parse_filter({"type": "in", "key": "year", "value": [2023, 2024]})
    assert parsed == Comparison("in", "year", (2023, 2024))


def test_nested_compound_parses():
    parsed = parse_filter(
        {
            "type": "and",
            "filters": [
                {"type": "gte", "key": "year", "value": 2020},
                {"type": "or", "filters": [{"type": "eq", "key": "public", "value": True}]},
            ],
        }
    )
    assert parsed == Compound(
        "and", (Comparison("gte", "year", 2020), Compound("or", (Comparison("eq", "public", True),)))
    )


def _error(obj: Any) -> FilterError:
    with pytest.raises(FilterError) as caught:
        parse_filter(obj)
    return caught.value


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ("dept = sales", "filters"),
        ({"key": "dept", "value": 1}, "filters.type"),
        ({"type": "like", "key": "dept", "value": "x"}, "filters.type"),
        ({"type": "eq", "value": "x"}, "filters.key"),
        ({"type": "eq", "key": "dept"}, "filters.value"),
        ({"type": "eq", "key": "dept", "value": None}, "filters.value"),
        ({"type": "eq", "key": "dept", "value": {"a": 1}}, "filters.value"),
        ({"type": "eq", "key": "dept", "value": ["a"]}, "filters.value"),
        ({"type": "eq", "key": "dept", "value": "x" * 513}, "filters.value"),
        ({"type": "eq", "key": "day", "value": "2024-02-30"}, "filters.value"),
        ({"type": "eq", "key": "n", "value": 2**60}, "filters.value"),
        ({"type": "gt", "key": "flag", "value": True}, "filters.value"),
        ({"type": "in", "key": "dept", "value": "sales"}, "filters.value"),
        ({"type": "in", "key": "dept", "value": []}, "filters.value"),
        ({"type": "nin", "key": "dept", "value": ["a", None]}, "filters.value[1]"),
        ({"type": "in", "key": "n", "value": list(range(MAX_LIST_VALUES + 1))}, "filters.value"),
        ({"type": "eq", "key": "dept", "value": "x", "extra": 1}, "filters.extra"),
        ({"type": "and", "filters": []}, "filters.filters"),
        ({"type": "or", "filters": {"type": "eq"}}, "filters.filters"),
        (
            {"type": "and", "filters": [{"type": "eq", "key": "a", "value": 1}, {"type": "gt", "key": "b"}]},
            "filters.filters[1].value",
        ),
        (
            {
                "type": "or",
                "filters": [{"type": "and", "filters": [{"type": "eq", "key": "1x", "value": 1}]}],
            },
            "filters.filters[0].filters[0].key",
        ),
    ],
)
def test_bad_filter_names_the_offending_field(obj, field):
    assert _error(obj).field == field


@pytest.mark.parametrize(
    "key",
    [
        "dept' OR '1'='1",
        'dept"]',
        "a b",
        "$.dept",
        "dept;--",
        "",
        "x" * 65,
        "9lives",
        'a")) OR 1=1 --',
    ],
)
def test_keys_outside_the_attribute_pattern_are_refused(key):
    assert _error({"type": "eq", "key": key, "value": 1}).field == "filters.key"


def test_depth_is_bounded():
    leaf: dict[str, Any] = {"type": "eq", "key": "a", "value": 1}
    node = leaf
    for _ in range(MAX_DEPTH):
        node = {"type": "and", "filters": [node]}
    parse_filter(node)  # MAX_DEPTH compound levels are fine
    too_deep = {"type": "or", "filters": [node]}
    assert "nest" in _error(too_deep).message


def test_number_of_comparisons_is_bounded():
    leaves = [{"type": "eq", "key": "a", "value": i} for i in range(MAX_CONDITIONS + 1)]
    parse_filter({"type": "or", "filters": leaves[:-1]})
    assert _error({"type": "or", "filters": leaves}).field == f"filters.filters[{MAX_CONDITIONS}]"


def test_error_messages_never_repeat_the_submitted_value():
    secret = "<script>alert(1)</script>" * 30
    err = _error({"type": "eq", "key": "dept", "value": secret})
    assert secret[:20] not in str(err)


def test_json_text_is_accepted_and_bad_json_is_a_filter_error():
    assert parse_filter_json('{"type": "ne", "key": "a", "value": 1}') == Comparison("ne", "a", 1)
    with pytest.raises(FilterError) as caught:
        parse_filter_json("{not json", field="filter")
    assert caught.value.field == "filter"
    with pytest.raises(FilterError):
        parse_filter_json("[" * 100_000)


def test_the_field_name_prefixes_error_paths():
    with pytest.raises(FilterError) as caught:
        parse_filter({"type": "eq", "key": "a"}, field="attribute_filter")
    assert caught.value.field == "attribute_filter.value"


def test_values_and_keys_are_parameters_not_sql_text():
    for vendor in ("sqlite", "postgresql"):
        sql, params = filter_sql(
            parse_filter({"type": "eq", "key": "dept.name", "value": "x'); DROP TABLE t; --"}),
            vendor,
            "attrs",
        )
        assert "DROP" not in sql
        assert "dept.name" not in sql
        assert any("DROP" in str(p) for p in params)


def test_column_must_be_a_column_reference():
    f = parse_filter({"type": "eq", "key": "a", "value": 1})
    filter_sql(f, "sqlite", '"documents_document"."attributes"')
    with pytest.raises(ValueError, match="column"):
        filter_sql(f, "sqlite", "attrs) OR (1=1")
    with pytest.raises(ValueError, match="vendor"):
        filter_sql(f, "oracle", "attrs")


# --- SQL on the real database of this pass ------------------------------------------------------

ROWS: dict[int, dict[str, Any]] = {
    1: {
        "dept": "sales",
        "year": 2024,
        "score": 4.5,
        "public": True,
        "published": "2024-03-01",
        "team.name-x": "north",
    },
    2: {"dept": "legal", "year": 2023, "score": 3, "public": False, "published": "2023-12-31"},
    # Same names, other types: a string year, a string "true", a string that is not a date.
    3: {"dept": "Sales", "year": "2024", "public": "true", "published": "soon", "score": "4.5"},
    4: {},
    5: {
        "dept": "x'); DROP TABLE attr_probe; --",
        "year": 2025.0,
        "published": "2025-01-15",
        "note": 'say "hi" % \\ _',
        "zh": "研发部",
    },
}


@pytest.fixture
def probe(db: None) -> Iterator[str]:
    jsontype = "jsonb" if connection.vendor == "postgresql" else "text"
    with connection.cursor() as cur:
        cur.execute(f"CREATE TEMPORARY TABLE attr_probe (id integer PRIMARY KEY, attrs {jsontype} NOT NULL)")
        for pk, attrs in ROWS.items():
            cur.execute("INSERT INTO attr_probe (id, attrs) VALUES (%s, %s)", [pk, json.dumps(attrs)])
    yield "attr_probe"
    with connection.cursor() as cur:
        cur.execute("DROP TABLE attr_probe")


def matching(filter_obj: dict[str, Any]) -> set[int]:
    sql, params = filter_sql(parse_filter(filter_obj), connection.vendor, "attrs")
    with connection.cursor() as cur:
        cur.execute(f"SELECT id FROM attr_probe WHERE {sql}", params)
        return {row[0] for row in cur.fetchall()}


def eq(key: str, value: Any, op: str = "eq") -> dict[str, Any]:
    return {"type": op, "key": key, "value": value}


ALL = set(ROWS)

CASES: list[tuple[str, dict[str, Any], set[int]]] = [
    # eq / ne on each type; strings are case-sensitive and typed.
    ("eq string", eq("dept", "sales"), {1}),
    ("ne string matches missing and others", eq("dept", "sales", "ne"), ALL - {1}),
    ("eq number int matches float", eq("year", 2025), {5}),
    ("eq number is not the string", eq("year", 2024), {1}),
    ("eq string is not the number", eq("year", "2024"), {3}),
    ("ne number", eq("year", 2024, "ne"), ALL - {1}),
    ("eq float", eq("score", 4.5), {1}),
    ("eq int against float value", eq("score", 3.0), {2}),
    ("eq boolean true", eq("public", True), {1}),
    ("eq boolean false", eq("public", False), {2}),
    ("ne boolean true", eq("public", True, "ne"), ALL - {1}),
    ("eq date", eq("published", "2024-03-01"), {1}),
    ("eq key with dot and dash", eq("team.name-x", "north"), {1}),
    ("eq unicode", eq("zh", "研发部"), {5}),
    ("eq value with quotes and wildcards", eq("note", 'say "hi" % \\ _'), {5}),
    # missing keys
    ("eq on a key nobody has", eq("absent", "x"), set()),
    ("ne on a key nobody has", eq("absent", "x", "ne"), ALL),
    ("nin on a key nobody has", eq("absent", ["x"], "nin"), ALL),
    # ranges on numbers: strings and missing never match
    ("gt number", eq("year", 2023, "gt"), {1, 5}),
    ("gte number", eq("year", 2024, "gte"), {1, 5}),
    ("lt number", eq("year", 2024, "lt"), {2}),
    ("lte number", eq("year", 2024, "lte"), {1, 2}),
    ("gt float", eq("score", 3.5, "gt"), {1}),
    ("lt number is numeric not text order", eq("score", 10, "lt"), {1, 2}),
    # ranges on dates: only real date-shaped values, chronological
    ("gt date", eq("published", "2024-01-01", "gt"), {1, 5}),
    ("gte date", eq("published", "2024-03-01", "gte"), {1, 5}),
    ("lt date", eq("published", "2024-03-01", "lt"), {2}),
    ("lte date", eq("published", "2023-12-31", "lte"), {2}),
    ("date range skips non-dates", eq("published", "0001-01-01", "gt"), {1, 2, 5}),
    # ranges on strings: code point order (upper case before lower case)
    ("gt string", eq("dept", "m", "gt"), {1, 5}),
    ("lt string code point order", eq("dept", "a", "lt"), {3}),
    # in / nin
    ("in strings", eq("dept", ["sales", "legal"], "in"), {1, 2}),
    ("in numbers", eq("year", [2023, 2025], "in"), {2, 5}),
    ("in mixed types", eq("year", [2023, "2024"], "in"), {2, 3}),
    ("in booleans", eq("public", [False], "in"), {2}),
    ("nin strings", eq("dept", ["sales", "legal"], "nin"), {3, 4, 5}),
    ("nin mixed", eq("public", [True, "true"], "nin"), {2, 4, 5}),
    # and / or, nested
    ("and", {"type": "and", "filters": [eq("year", 2020, "gt"), eq("public", True)]}, {1}),
    ("or", {"type": "or", "filters": [eq("dept", "legal"), eq("zh", "研发部")]}, {2, 5}),
    (
        "nested",
        {
            "type": "or",
            "filters": [
                {"type": "and", "filters": [eq("year", 2024, "gte"), eq("published", "2025-01-01", "lt")]},
                {"type": "and", "filters": [eq("dept", "Sales"), eq("public", "true")]},
            ],
        },
        {1, 3},
    ),
    ("and with ne on missing", {"type": "and", "filters": [eq("absent", 1, "ne"), eq("dept", "legal")]}, {2}),
    # injection attempts in values are plain data
    ("injection in value", eq("dept", "x'); DROP TABLE attr_probe; --"), {5}),
    ("injection-like value matches nothing", eq("dept", "' OR '1'='1"), set()),
    ("injection in list", eq("dept", ["' OR 1=1 --", '" OR ""="'], "in"), set()),
]


@pytest.mark.parametrize(("filter_obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter_sql_matches(probe, filter_obj, expected):
    assert matching(filter_obj) == expected


def test_injection_attempt_leaves_the_table_intact(probe):
    matching(eq("dept", "x'); DROP TABLE attr_probe; --"))
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM attr_probe")
        assert cur.fetchone()[0] == len(ROWS)


def test_fragment_combines_with_other_conditions(probe):
    sql, params = filter_sql(parse_filter(eq("year", 2023, "gt")), connection.vendor, "p.attrs")
    with connection.cursor() as cur:
        cur.execute(f"SELECT p.id FROM attr_probe p WHERE p.id > %s AND {sql} ORDER BY p.id", [1, *params])
        assert [row[0] for row in cur.fetchall()] == [5]
