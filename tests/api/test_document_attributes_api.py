"""Attributes and titles through the REST API: set at upload (a JSON object in a multipart field),
replaced with ``PATCH /api/documents/{id}/``, shown in the list and the detail; bad input is a 400
naming the field and changes or stores nothing; another tenant's PATCH is a 404."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Document, DocumentVersion
from jobs.models import Job
from tests.api.conftest import TEXT, Caller, assert_error

pytestmark = pytest.mark.django_db

ATTRS = {"department": "legal", "year": 2024, "confidential": False, "signed_on": "2024-03-01"}


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def upload(caller: Caller, attributes: Any, *, document: str | None = None, data: bytes = TEXT) -> Any:
    form: dict[str, Any] = {"file": SimpleUploadedFile("notes.txt", data)}
    if attributes is not None:
        form["attributes"] = attributes if isinstance(attributes, str) else json.dumps(attributes)
    url = f"/api/documents/{document}/versions/" if document else "/api/documents/"
    return caller.client.post(url, form, format="multipart")


def patch(caller: Caller, document_id: str, body: Any, **kwargs: Any) -> Any:
    return caller.client.patch(
        f"/api/documents/{document_id}/", json.dumps(body), content_type="application/json", **kwargs
    )


def detail(caller: Caller, document_id: str) -> dict[str, Any]:
    response = caller.client.get(f"/api/documents/{document_id}/")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


# --- at upload --------------------------------------------------------------------------------------


def test_upload_with_attributes_shows_them_in_detail_and_list(alice: Caller):
    response = upload(alice, ATTRS)
    assert response.status_code == 201, response.content
    document_id = response.json()["document_id"]

    assert detail(alice, document_id)["attributes"] == ATTRS
    listed = alice.client.get("/api/documents/").json()["results"]
    assert [d["attributes"] for d in listed] == [ATTRS]
    assert Document.objects.get(pk=document_id).attributes == ATTRS


def test_upload_without_attributes_has_an_empty_object(alice: Caller):
    assert detail(alice, alice.uploaded()["document_id"])["attributes"] == {}
    response = upload(alice, "  ", data=TEXT + b"blank attributes field")
    assert response.status_code == 201
    assert detail(alice, response.json()["document_id"])["attributes"] == {}


@pytest.mark.parametrize(
    ("attributes", "field", "code"),
    [
        ("{not json", "attributes", "attributes_not_json"),
        ("[1, 2]", "attributes", "attributes_not_object"),
        ({"bad key": 1}, "attributes", "invalid_attribute_key"),
        ({f"k{i}": i for i in range(17)}, "attributes", "too_many_attributes"),
        ({"year": None}, "attributes.year", "invalid_value_type"),
        ({"note": "x" * 513}, "attributes.note", "string_too_long"),
        ({"due": "2024-02-30"}, "attributes.due", "invalid_date"),
    ],
)
def test_upload_with_bad_attributes_is_400_naming_the_field_and_stores_nothing(
    alice: Caller, media: Path, attributes: Any, field: str, code: str
):
    error = assert_error(upload(alice, attributes), 400, code)
    assert list(error["detail"]) == [field]
    assert not Document.objects.exists()
    assert not DocumentVersion.objects.exists()
    assert not Job.objects.exists()
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def test_oversized_attributes_field_is_400_naming_it(alice: Caller):
    error = assert_error(upload(alice, "x" * 20_001), 400, "invalid")
    assert list(error["detail"]) == ["attributes"]
    assert not Document.objects.exists()


def test_a_new_version_with_attributes_replaces_them(alice: Caller):
    first = upload(alice, ATTRS).json()
    response = upload(alice, {"year": 2025}, document=first["document_id"], data=TEXT + b"v2")
    assert response.status_code == 201
    assert detail(alice, first["document_id"])["attributes"] == {"year": 2025}


def test_a_refused_new_version_keeps_the_attributes(alice: Caller):
    first = upload(alice, ATTRS).json()
    response = upload(alice, {"year": "2025-02-30"}, document=first["document_id"], data=TEXT + b"v2")
    assert_error(response, 400, "invalid_date")
    assert detail(alice, first["document_id"])["attributes"] == ATTRS
    assert DocumentVersion.objects.count() == 1


# --- PATCH ------------------------------------------------------------------------------------------


def test_patch_replaces_the_attributes_and_keeps_the_title(alice: Caller):
    document_id = upload(alice, ATTRS).json()["document_id"]
    title = detail(alice, document_id)["title"]

    response = patch(alice, document_id, {"attributes": {"year": 2025, "reviewed": True}})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["attributes"] == {"year": 2025, "reviewed": True}
    assert body["title"] == title
    assert body["versions"][0]["version"] == 1  # the detail representation, as GET answers it
    assert detail(alice, document_id) == body


def test_patch_changes_the_title_and_keeps_the_attributes(alice: Caller):
    document_id = upload(alice, ATTRS).json()["document_id"]
    body = patch(alice, document_id, {"title": "Q3 contract"}).json()
    assert (body["title"], body["attributes"]) == ("Q3 contract", ATTRS)


def test_patch_changes_both_and_can_clear_the_attributes(alice: Caller):
    document_id = upload(alice, ATTRS).json()["document_id"]
    body = patch(alice, document_id, {"title": "Renamed", "attributes": {}}).json()
    assert (body["title"], body["attributes"]) == ("Renamed", {})


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"attributes": {"year": 2025}, "title": ""}, "title", "invalid_title"),
        ({"attributes": {"year": 2025}, "title": None}, "title", "invalid_title"),
        ({"title": "T", "attributes": {"due": "2024-02-30"}}, "attributes.due", "invalid_date"),
        ({"title": "T", "attributes": None}, "attributes", "attributes_not_object"),
        ({"title": "T", "attributes": "year=2024"}, "attributes", "attributes_not_object"),
        ({"title": "x" * 301}, "title", "invalid_title"),
        ({"title": 5}, "title", "invalid_title"),
        ({"attributes": {"year": 2025}, "attribute": {}}, "attribute", "unknown_field"),
        ({}, "body", "nothing_to_change"),
        ([{"title": "T"}], "body", "invalid_body"),
    ],
)
def test_bad_patch_is_400_naming_the_field_and_changes_nothing(
    alice: Caller, body: Any, field: str, code: str
):
    document_id = upload(alice, ATTRS).json()["document_id"]
    before = detail(alice, document_id)

    error = assert_error(patch(alice, document_id, body), 400, code)

    assert list(error["detail"]) == [field]
    assert detail(alice, document_id) == before


def test_patch_with_a_form_body_is_415(alice: Caller):
    document_id = alice.uploaded()["document_id"]
    response = alice.client.patch(
        f"/api/documents/{document_id}/", "title=x", content_type="application/x-www-form-urlencoded"
    )
    assert_error(response, 415, "unsupported_media_type")


def test_patch_with_broken_json_is_400(alice: Caller):
    document_id = alice.uploaded()["document_id"]
    response = alice.client.patch(
        f"/api/documents/{document_id}/", '{"title": ', content_type="application/json"
    )
    assert_error(response, 400, "bad_request")


def test_patch_needs_authentication(alice: Caller):
    document_id = alice.uploaded()["document_id"]
    alice.client.credentials()
    assert_error(patch(alice, document_id, {"title": "x"}), 401, "not_authenticated")


def test_another_tenants_patch_is_404_like_an_unknown_id_and_changes_nothing(alice: Caller, mallory: Caller):
    document_id = upload(alice, ATTRS).json()["document_id"]
    before = detail(alice, document_id)
    evil = {"title": "Owned", "attributes": {"owned": True}}

    theirs = patch(mallory, document_id, evil)
    unknown = patch(mallory, str(uuid.uuid4()), evil)
    malformed = patch(mallory, "not-a-uuid", evil)

    assert_error(theirs, 404, "not_found")
    assert (unknown.status_code, unknown.content) == (404, theirs.content)
    assert (malformed.status_code, malformed.content) == (404, theirs.content)
    # Even a body that would be refused answers 404 first: nothing tells the document exists.
    assert patch(mallory, document_id, {"title": ""}).content == theirs.content
    assert detail(alice, document_id) == before
