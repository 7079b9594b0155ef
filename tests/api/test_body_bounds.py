"""Bodies are bounded: nesting (a parser-level 400, not a 500) and every list they carry."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from documents.api.parsers import MAX_JSON_DEPTH, MAX_JSON_ITEMS, json_depth
from documents.api_v1.vector_stores import MAX_BATCH_FILES, MAX_QUERY_STRINGS, MAX_STORE_FILE_IDS
from documents.models import Collection
from tests.api.conftest import Caller, assert_error, assert_no_leak

pytestmark = pytest.mark.django_db

DEEP = b"[" * 100_000 + b"]" * 100_000


def v1(caller: Caller) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    return client


def _posted(client: APIClient, path: str, body: bytes) -> Any:
    return client.generic("POST", path, body.decode(), content_type="application/json")


@pytest.mark.parametrize(
    "path", ["/api/search", "/api/collections", "/api/reindex", "/api/webhooks", "/v1/vector_stores"]
)
def test_deeply_nested_json_is_refused_with_400(alice: Caller, path: str) -> None:
    client = v1(alice) if path.startswith("/v1/") else alice.client
    response = _posted(client, path, b'{"query": "harbor", "filters": ' + DEEP + b"}")
    assert response.status_code == 400, response.content[:300]
    assert_no_leak(response.content)
    code = response.json()["error"]["code"]
    assert code == "json_too_deep"


def test_nested_metadata_leaves_the_collection_unmade(alice: Caller) -> None:
    before = Collection.objects.count()
    body = b'{"name": "Harbor", "metadata": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    assert_error(_posted(alice.client, "/api/collections", body), 400, "json_too_deep")
    assert Collection.objects.count() == before


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert json_depth(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "b": [1, {"c": 2}]}') == 3
    assert json_depth(b'["\\"[[[[", [[]]]') == 3
    assert json_depth(b"7") == 0


def test_ordinary_nesting_is_accepted(alice: Caller) -> None:
    inner: Any = {"type": "eq", "key": "year", "value": 2024}
    for _ in range(4):
        inner = {"type": "and", "filters": [inner]}
    response = alice.client.post("/api/search", {"query": "harbor", "filters": inner}, format="json")
    assert response.status_code == 200, response.content
    assert json_depth(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) == MAX_JSON_DEPTH


def test_a_list_past_the_parser_bound_is_refused(alice: Caller) -> None:
    body = {"query": "harbor", "document_ids": ["x"] * (MAX_JSON_ITEMS + 1)}
    assert_error(alice.client.post("/api/search", body, format="json"), 400, "json_too_many_items")


def _v1_error(response: Any, code: str, param: str) -> None:
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert (error["code"], error["param"]) == (code, param)


def test_vector_store_file_ids_are_bounded(alice: Caller) -> None:
    client = v1(alice)
    ids = [f"file-{n}" for n in range(MAX_STORE_FILE_IDS + 1)]
    before = Collection.objects.count()
    _v1_error(
        client.post("/v1/vector_stores", {"name": "s", "file_ids": ids}, format="json"),
        "too_many_items",
        "file_ids",
    )
    assert Collection.objects.count() == before  # nothing made
    _v1_error(
        client.post("/v1/vector_stores", {"name": "s", "file_ids": "file-1"}, format="json"),
        "invalid_type",
        "file_ids",
    )


def test_file_batch_lists_and_query_lists_are_bounded(alice: Caller) -> None:
    client = v1(alice)
    store = client.post("/v1/vector_stores", {"name": "s"}, format="json").json()["id"]
    ids = [f"file-{n}" for n in range(MAX_BATCH_FILES + 1)]
    batches = f"/v1/vector_stores/{store}/file_batches"
    _v1_error(client.post(batches, {"file_ids": ids}, format="json"), "too_many_items", "file_ids")
    files = [{"file_id": i} for i in ids]
    _v1_error(client.post(batches, {"files": files}, format="json"), "too_many_items", "files")
    query = ["harbor"] * (MAX_QUERY_STRINGS + 1)
    _v1_error(
        client.post(f"/v1/vector_stores/{store}/search", {"query": query}, format="json"),
        "too_many_items",
        "query",
    )
