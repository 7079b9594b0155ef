"""One rule for input the API does not take: an unknown body key or query parameter, and a
malformed filter in a query parameter, are answered 400 in the one error shape naming it, and
change nothing (the OpenAI-compatible /v1 keeps its own contract)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Batch, Collection, Document, WebhookEndpoint
from tests.api.conftest import TEXT, Caller, assert_error, drive

pytestmark = pytest.mark.django_db


def post_json(caller: Caller, url: str, body: dict[str, Any]) -> Any:
    return caller.client.post(url, json.dumps(body), content_type="application/json")


def unknown(response: Any, name: str) -> dict[str, Any]:
    error = assert_error(response, 400, "unknown_field")
    assert set(error["detail"]) == {name}, error
    assert f"“{name}”" in error["message"]
    return error


def test_an_unknown_search_body_key_is_400_naming_it(alice: Caller):
    error = unknown(post_json(alice, "/api/search", {"query": "harbor", "limit": 3}), "limit")
    assert error["message"] == (
        "Unknown field “limit”; expected only: "
        "collections, document_ids, filters, k, mode, neighbours, query."
    )


def test_an_unknown_search_query_parameter_is_400_naming_it(alice: Caller):
    unknown(alice.client.get("/api/search", {"q": "harbor", "limit": "3"}), "limit")


def test_a_malformed_filter_in_the_query_string_is_400_naming_the_parameter(alice: Caller):
    response = alice.client.get("/api/search?q=harbor&filters=%7Bbad")
    error = assert_error(response, 400, "invalid_filter")
    assert error["detail"] == {"filters": ["Must be a JSON object."]}


def test_a_filter_in_the_query_string_filters_like_one_in_the_body(alice: Caller, settings: Any, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    form = {"file": SimpleUploadedFile("n.txt", TEXT), "attributes": json.dumps({"dept": "ops"})}
    upload = alice.client.post("/api/documents/", form, format="multipart").json()
    drive(upload["job_id"])

    def hits(dept: str) -> list[str]:
        filters = json.dumps({"type": "eq", "key": "dept", "value": dept})
        response = alice.client.get("/api/search", {"q": "amber falcons", "filters": filters})
        assert response.status_code == 200, response.content
        return [hit["document_id"] for hit in response.json()["results"]]

    assert hits("ops") == [upload["document_id"]]
    assert hits("legal") == []


def test_an_unknown_upload_field_is_400_and_stores_nothing(alice: Caller):
    form = {"file": SimpleUploadedFile("n.txt", TEXT), "titel": "Typo"}
    unknown(alice.client.post("/api/documents/", form, format="multipart"), "titel")
    assert Document.objects.count() == 0


def test_the_documents_list_takes_its_paging_but_no_unknown_parameter(alice: Caller):
    assert alice.client.get("/api/documents/", {"page": "1", "page_size": "5"}).status_code == 200
    unknown(alice.client.get("/api/documents/", {"sort": "title"}), "sort")


def test_unknown_keys_of_collections_webhooks_and_batches_are_400_and_change_nothing(alice: Caller):
    collections = Collection.objects.count()
    unknown(post_json(alice, "/api/collections", {"name": "Contracts", "colour": "red"}), "colour")
    assert Collection.objects.count() == collections

    hook = {"url": "https://example.com/hook", "events": ["document.ready"], "secret": "x"}
    unknown(post_json(alice, "/api/webhooks", hook), "secret")
    assert WebhookEndpoint.objects.count() == 0

    form = {"files": [SimpleUploadedFile("n.txt", TEXT)], "colection": "x"}
    unknown(alice.client.post("/api/batches", form, format="multipart"), "colection")
    assert Batch.objects.count() == 0 and Document.objects.count() == 0


def test_a_name_that_is_not_a_plain_identifier_is_not_echoed(alice: Caller):
    error = assert_error(post_json(alice, "/api/search", {"query": "x", "<b>x</b>": 1}), 400, "unknown_field")
    assert set(error["detail"]) == {"?"} and "<b>" not in json.dumps(error)
