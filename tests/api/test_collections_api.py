"""Collections through the REST API: create, list and read with counts, PATCH, DELETE (each
document through the delete service), uploads into a collection, the documents list and search
scoped to collections inside the query, and another tenant's collection a 404 everywhere.
Runs on both databases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.models import Collection, Deletion, Document
from tests.api.conftest import Caller, assert_error, drive

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def create(caller: Caller, body: dict[str, Any]) -> Any:
    return caller.client.post("/api/collections", json.dumps(body), content_type="application/json")


def upload(caller: Caller, text: str, collection: str | None = None, run: bool = True) -> str:
    form: dict[str, Any] = {"file": SimpleUploadedFile("notes.txt", text.encode())}
    if collection is not None:
        form["collection"] = collection
    response = caller.client.post("/api/documents/", form, format="multipart")
    assert response.status_code == 201, response.content
    if run:
        drive(response.json()["job_id"])
    return str(response.json()["document_id"])


def hits(caller: Caller, query: str, **params: str) -> set[str]:
    response = caller.client.get("/api/search", {"q": query, "k": "20", **params})
    assert response.status_code == 200, response.content
    return {h["document_id"] for h in response.json()["results"]}


def listed(caller: Caller, **params: str) -> set[str]:
    response = caller.client.get("/api/documents/", params)
    assert response.status_code == 200, response.content
    return {d["document_id"] for d in response.json()["results"]}


def test_create_list_get_patch_and_counts(alice: Caller):
    response = create(
        alice, {"name": "Contracts", "description": "Signed ones", "metadata": {"team": "legal"}}
    )
    assert response.status_code == 201, response.content
    made = response.json()
    assert (made["name"], made["description"], made["metadata"], made["is_default"]) == (
        "Contracts",
        "Signed ones",
        {"team": "legal"},
        False,
    )
    cid = made["id"]
    ready = upload(alice, "Amber falcon contract, signed in spring.", cid)
    upload(alice, "Queued draft of another contract.", cid, run=False)
    upload(alice, "A note in the default collection.")

    one = alice.client.get(f"/api/collections/{cid}/").json()
    assert one["document_counts"] == {
        "queued": 1,
        "in_progress": 0,
        "ready": 1,
        "failed": 0,
        "cancelled": 0,
        "total": 2,
    }
    chunks = Document.objects.get(pk=ready).published_version.chunks.count()  # type: ignore[union-attr]
    assert one["chunk_count"] == chunks > 0

    with CaptureQueriesContext(connection) as queries:
        listing = alice.client.get("/api/collections")
    assert listing.status_code == 200
    by_name = {c["name"]: c for c in listing.json()}
    assert set(by_name) == {"Contracts", "Default"} and by_name["Default"]["is_default"]
    assert by_name["Default"]["document_counts"]["total"] == 1
    few = len(queries)
    for n in range(3):  # more collections, the same number of queries
        create(alice, {"name": f"extra {n}"})
    with CaptureQueriesContext(connection) as queries:
        assert len(alice.client.get("/api/collections/").json()) == 5
    assert len(queries) == few

    patched = alice.client.patch(
        f"/api/collections/{cid}", json.dumps({"name": "Contracts 2025"}), content_type="application/json"
    )
    assert patched.status_code == 200
    assert (patched.json()["name"], patched.json()["description"]) == ("Contracts 2025", "Signed ones")


def test_bad_fields_are_400_with_their_code(alice: Caller):
    assert "name" in assert_error(create(alice, {"name": "   "}), 400, "invalid")["detail"]
    too_many = {f"k{n}": "v" for n in range(17)}
    assert_error(create(alice, {"name": "x", "metadata": too_many}), 400, "invalid_metadata")
    assert_error(alice.client.get("/api/collections/not-a-uuid"), 404, "not_found")
    assert Collection.objects.count() == 0


def test_search_and_the_list_are_scoped_to_collections_inside_the_query(alice: Caller):
    a = create(alice, {"name": "A"}).json()["id"]
    b = create(alice, {"name": "B"}).json()["id"]
    in_a = upload(alice, "Harbor lighthouse keeper's log, first winter.", a)
    in_b = upload(alice, "Harbor lighthouse repair invoice.", b)
    in_default = upload(alice, "Harbor lighthouse postcard.")

    assert hits(alice, "harbor lighthouse") == {in_a, in_b, in_default}
    assert hits(alice, "harbor lighthouse", collections=a) == {in_a}
    assert hits(alice, "harbor lighthouse", collections=f"{a},{b}") == {in_a, in_b}
    # k=1 inside one collection still finds its document: the scope is in the query, not after it.
    body = {"query": "harbor lighthouse", "k": 1, "collections": [b]}
    response = alice.client.post("/api/search", json.dumps(body), content_type="application/json")
    assert [h["document_id"] for h in response.json()["results"]] == [in_b]
    assert hits(alice, "harbor lighthouse", collections=b, mode="lexical") == {in_b}

    assert listed(alice, collection=a) == {in_a}
    assert listed(alice, collections=f"{a},{b}") == {in_a, in_b}
    assert_error(alice.client.get("/api/documents/", {"collection": "nope"}), 400, "invalid")


def test_another_tenants_collection_is_404_and_never_scopes_into_it(alice: Caller, mallory: Caller):
    theirs = create(mallory, {"name": "Secret"}).json()["id"]
    secret = upload(mallory, "Harbor lighthouse secret plans.", theirs)
    ours = upload(alice, "Harbor lighthouse public notes.")

    assert_error(alice.client.get(f"/api/collections/{theirs}"), 404, "not_found")
    patch = alice.client.patch(
        f"/api/collections/{theirs}", json.dumps({"name": "x"}), content_type="application/json"
    )
    assert_error(patch, 404, "not_found")
    assert_error(alice.client.delete(f"/api/collections/{theirs}"), 404, "not_found")
    refused = alice.client.post(
        "/api/documents/",
        {"file": SimpleUploadedFile("a.txt", b"Some words here."), "collection": theirs},
        format="multipart",
    )
    assert_error(refused, 404, "collection_not_found")
    assert theirs not in {c["id"] for c in alice.client.get("/api/collections").json()}
    assert hits(alice, "harbor lighthouse", collections=theirs) == set()
    assert listed(alice, collection=theirs) == set()
    assert hits(alice, "harbor lighthouse") == {ours}
    assert Collection.objects.get(pk=theirs).name == "Secret"
    assert hits(mallory, "harbor lighthouse") == {secret}


def test_delete_removes_each_document_through_the_delete_service(alice: Caller):
    cid = create(alice, {"name": "Old"}).json()["id"]
    gone = [upload(alice, "Harbor lighthouse minutes.", cid), upload(alice, "Queued agenda.", cid, run=False)]
    kept = upload(alice, "Harbor lighthouse budget.")

    response = alice.client.delete(f"/api/collections/{cid}")

    assert response.status_code == 204
    assert not Collection.objects.filter(pk=cid).exists()
    assert hits(alice, "harbor lighthouse") == {kept}
    assert listed(alice) == {kept}
    assert set(Deletion.objects.values_list("document_id", flat=True)) == {
        __import__("uuid").UUID(d) for d in gone
    }
    assert_error(alice.client.get(f"/api/collections/{cid}"), 404, "not_found")


def test_a_batch_goes_into_the_named_collection(alice: Caller, mallory: Caller):
    cid = create(alice, {"name": "Batch"}).json()["id"]
    files = [
        SimpleUploadedFile("a.txt", b"First file words."),
        SimpleUploadedFile("b.txt", b"Second file words."),
    ]
    response = alice.client.post("/api/batches", {"files": files, "collection": cid}, format="multipart")
    assert response.status_code == 201, response.content
    assert listed(alice, collection=cid) == {d["document_id"] for d in response.json()["documents"]}
    theirs = create(mallory, {"name": "Theirs"}).json()["id"]
    refused = alice.client.post(
        "/api/batches",
        {"files": [SimpleUploadedFile("c.txt", b"Words.")], "collection": theirs},
        format="multipart",
    )
    assert_error(refused, 404, "collection_not_found")
