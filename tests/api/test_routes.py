"""Both trailing-slash forms of every API route are served by the same view, without a redirect
(docs/api.md; a redirect would drop a POST's method and body); the schema lists each once."""

from __future__ import annotations

import re

import pytest
from django.urls import resolve

from tests.api.conftest import TEXT, Caller
from tests.api.test_schema import EVENTS, OPERATIONS, served_schema

pytestmark = pytest.mark.django_db

IDS = {
    "document_id": "0b0b8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "job_id": "1c1c8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "number": "2",
    "batch_id": "7",
    "endpoint_id": "9",
    "collection_id": "2c2c8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "query_set_id": "3d3d8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "run_id": "4e4e8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "other_id": "5f5f8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
    "group_id": "11",
    "user_id": "12",
    "source_id": "6a6a8c1e-3c4f-4a5e-9d0f-1a2b3c4d5e6f",
}


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: IDS[m.group(1)], path)


# /api/ routes (the /v1 facade follows OpenAI's paths, which have no trailing slash).
@pytest.mark.parametrize("path", sorted({p for _, p in OPERATIONS if p.startswith("/api/")} | {EVENTS}))
def test_both_slash_forms_resolve_to_the_same_view(path: str):
    url = concrete(path)
    other = url[:-1] if url.endswith("/") else f"{url}/"
    assert resolve(url).func.__name__ == resolve(other).func.__name__, (url, other)


def test_the_other_forms_answer_without_a_redirect(alice: Caller):
    created = alice.client.post("/api/documents", {"file": _file()}, format="multipart")
    assert created.status_code == 201, created.content
    body = created.json()
    assert alice.client.get(body["status_url"] + "/").status_code == 200
    assert alice.client.get("/api/search/", {"q": "harbor"}).status_code == 200
    assert (
        alice.client.get(f"/api/documents/{body['document_id']}/versions/2/process-again").status_code == 405
    )
    cancel = alice.client.post(body["status_url"] + "/cancel/")
    assert cancel.status_code == 202, cancel.content


def test_the_schema_lists_each_route_once(alice: Caller):
    paths = list(served_schema(alice)["paths"])
    assert len({p.rstrip("/") for p in paths}) == len(paths), paths


def _file():
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("notes.txt", TEXT)
