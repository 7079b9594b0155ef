"""The OpenAPI schema: valid (drf-spectacular's own validation and openapi-spec-validator),
complete, and served with its docs page. ``test_schema_fuzz.py`` holds it against the server."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.core.management import call_command

from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import Caller, assert_error

pytestmark = pytest.mark.django_db

OPERATIONS = [
    ("GET", "/api/documents/"),
    ("POST", "/api/documents/"),
    ("GET", "/api/documents/{document_id}/"),
    ("PATCH", "/api/documents/{document_id}/"),
    ("POST", "/api/documents/{document_id}/versions/"),
    ("GET", "/api/documents/{document_id}/jobs/{job_id}"),
    ("POST", "/api/documents/{document_id}/jobs/{job_id}/cancel"),
    ("POST", "/api/documents/{document_id}/jobs/{job_id}/retry"),
    ("GET", "/api/search"),
    ("DELETE", "/api/documents/{document_id}/"),
    ("DELETE", "/api/documents/{document_id}/versions/{number}/"),
    ("POST", "/api/documents/{document_id}/versions/{number}/process-again/"),
    ("POST", "/api/batches/"),
    ("GET", "/api/batches/{batch_id}/"),
    ("POST", "/api/batches/{batch_id}/cancel/"),
    ("GET", "/api/webhooks/"),
    ("POST", "/api/webhooks/"),
    ("GET", "/api/webhooks/{endpoint_id}/"),
    ("PATCH", "/api/webhooks/{endpoint_id}/"),
    ("DELETE", "/api/webhooks/{endpoint_id}/"),
    ("POST", "/api/search"),
    ("GET", "/api/collections/"),
    ("POST", "/api/collections/"),
    ("GET", "/api/collections/{collection_id}/"),
    ("PATCH", "/api/collections/{collection_id}/"),
    ("DELETE", "/api/collections/{collection_id}/"),
    ("GET", "/api/documents/{document_id}/versions/{number}/chunks/"),
    ("GET", "/api/sources/"),
    ("POST", "/api/sources/"),
    ("GET", "/api/sources/{source_id}/"),
    ("PATCH", "/api/sources/{source_id}/"),
    ("DELETE", "/api/sources/{source_id}/"),
    ("POST", "/api/sources/{source_id}/sync/"),
    ("POST", "/api/reindex/"),
    ("GET", "/api/reindex/{job_id}/"),
    ("POST", "/api/reindex/{job_id}/cancel/"),
    ("POST", "/api/reindex/{job_id}/retry/"),
    ("GET", "/api/collections/{collection_id}/query-sets/"),
    ("POST", "/api/collections/{collection_id}/query-sets/"),
    ("GET", "/api/query-sets/{query_set_id}/"),
    ("POST", "/api/query-sets/{query_set_id}/queries/"),
    ("GET", "/api/query-sets/{query_set_id}/runs/"),
    ("POST", "/api/query-sets/{query_set_id}/runs/"),
    ("GET", "/api/evaluation-runs/{run_id}/"),
    ("GET", "/api/evaluation-runs/{run_id}/compare/{other_id}/"),
    ("POST", "/api/label-candidates/"),
    # Access lists and groups (docs/permissions.md).
    ("GET", "/api/documents/{document_id}/access/"),
    ("PUT", "/api/documents/{document_id}/access/"),
    ("PUT", "/api/access/documents/"),
    ("GET", "/api/collections/{collection_id}/access/"),
    ("PUT", "/api/collections/{collection_id}/access/"),
    ("GET", "/api/groups/"),
    ("POST", "/api/groups/"),
    ("GET", "/api/groups/{group_id}/"),
    ("PATCH", "/api/groups/{group_id}/"),
    ("DELETE", "/api/groups/{group_id}/"),
    ("POST", "/api/groups/{group_id}/members/"),
    ("DELETE", "/api/groups/{group_id}/members/{user_id}/"),
]
# The OpenAI-compatible API (docs/openai-v1.md).
OPERATIONS += [
    ("POST", "/v1/files"),
    ("GET", "/v1/files"),
    ("GET", "/v1/files/{file_id}"),
    ("DELETE", "/v1/files/{file_id}"),
    ("GET", "/v1/files/{file_id}/content"),
    ("POST", "/v1/vector_stores"),
    ("GET", "/v1/vector_stores"),
    ("GET", "/v1/vector_stores/{store_id}"),
    ("POST", "/v1/vector_stores/{store_id}"),
    ("DELETE", "/v1/vector_stores/{store_id}"),
    ("POST", "/v1/vector_stores/{store_id}/search"),
    ("POST", "/v1/vector_stores/{store_id}/files"),
    ("GET", "/v1/vector_stores/{store_id}/files"),
    ("GET", "/v1/vector_stores/{store_id}/files/{file_id}"),
    ("POST", "/v1/vector_stores/{store_id}/files/{file_id}"),
    ("DELETE", "/v1/vector_stores/{store_id}/files/{file_id}"),
    ("GET", "/v1/vector_stores/{store_id}/files/{file_id}/content"),
    ("POST", "/v1/vector_stores/{store_id}/file_batches"),
    ("GET", "/v1/vector_stores/{store_id}/file_batches/{batch_id}"),
    ("POST", "/v1/vector_stores/{store_id}/file_batches/{batch_id}/cancel"),
    ("GET", "/v1/vector_stores/{store_id}/file_batches/{batch_id}/files"),
]
EVENTS = "/api/documents/{document_id}/jobs/{job_id}/events"
TEXT = "/api/documents/{document_id}/versions/{number}/text/"  # text/plain, not JSON


def served_schema(caller: Caller) -> dict[str, Any]:
    response = caller.client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema: dict[str, Any] = json.loads(response.content)
    return schema


def test_the_schema_generates_without_errors_or_warnings(tmp_path: Path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out), stderr=StringIO())
    assert out.read_text().startswith("openapi: 3")


def test_the_served_schema_is_a_valid_openapi_document(alice: Caller):
    validator = pytest.importorskip("openapi_spec_validator")
    schema = served_schema(alice)
    validator.validate(schema)
    assert schema["info"]["title"] == "Document ingestion API"


def test_the_schema_documents_every_json_operation_with_both_authentications(alice: Caller):
    schema = served_schema(alice)
    documented = {
        (method.upper(), path)
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    }
    assert documented >= set(OPERATIONS)
    assert documented - set(OPERATIONS) <= {("GET", EVENTS), ("GET", TEXT)}
    assert set(schema["components"]["securitySchemes"]) == {"tokenAuth", "cookieAuth", "bearerAuth"}
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "A platform API token",
    }
    for method, path in OPERATIONS:
        scheme = "bearerAuth" if path.startswith("/v1/") else "tokenAuth"
        assert schema["paths"][path][method.lower()]["security"] == [{scheme: []}, {"cookieAuth": []}]


def test_the_schema_documents_the_events_stream(alice: Caller):
    assert "get" in served_schema(alice)["paths"].get(EVENTS, {})


def test_the_docs_page_loads_the_schema(alice: Caller):
    response = alice.client.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"/api/schema/" in response.content


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/"])
@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_the_schema_and_docs_answer_api_clients_with_the_json_error(url: str, accept: str | None) -> None:
    from rest_framework.test import APIClient

    response = APIClient().get(url, HTTP_ACCEPT=accept) if accept else APIClient().get(url)
    error = assert_error(response, 401, "not_authenticated")
    assert error["message"] == "Authentication is required: send a token or log in."


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/"])
def test_the_schema_and_docs_send_a_browser_to_the_login_page(url: str) -> None:
    from django.test import Client

    response = Client().get(url, HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={quote(url)}"
    # After logging in, the same browser gets the page.
    user_create_in_tenant(username="reader", tenant_slug="acme", password="s3cret-pass")
    client = Client()
    assert client.login(username="reader", password="s3cret-pass")
    assert client.get(url, HTTP_ACCEPT=BROWSER_ACCEPT).status_code == 200
