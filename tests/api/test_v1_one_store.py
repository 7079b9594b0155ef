"""One collection is one vector store with one list of files, whichever API filled it: documents
uploaded through /api (into a collection or the default one) are counted, listed, retrieved,
found and removed through /v1, and what /v1 attaches is listed by /api. A store's files report
the chunking the chunker used as OpenAI's ``static`` strategy. Runs on both databases."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from documents.embedders.hashing import HashingEmbedder
from documents.models import DocumentVersion
from tests.api.conftest import Caller, drive

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def v1(caller: Caller) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    return client


def upload(caller: Caller, name: str, text: str, collection: str | None = None) -> str:
    form: dict[str, Any] = {"file": SimpleUploadedFile(name, text.encode())}
    if collection is not None:
        form["collection"] = collection
    response = caller.client.post("/api/documents/", form, format="multipart")
    assert response.status_code == 201, response.content
    drive(response.json()["job_id"])
    return str(response.json()["document_id"])


def api_listed(caller: Caller, collection: str) -> set[str]:
    response = caller.client.get("/api/documents/", {"collections": collection})
    assert response.status_code == 200, response.content
    return {d["document_id"] for d in response.json()["results"]}


def store_files(client: APIClient, store: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/vector_stores/{store}/files", {"limit": 100})
    assert response.status_code == 200, response.content
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def test_documents_uploaded_through_api_are_the_files_of_their_store(alice: Caller) -> None:
    made = alice.client.post(
        "/api/collections", json.dumps({"name": "Harbour"}), content_type="application/json"
    )
    assert made.status_code == 201, made.content
    cid = made.json()["id"]
    store = f"vs_{cid.replace('-', '')}"
    harbour = upload(alice, "harbour.txt", "The harbour master logged the tide at dawn.", cid)
    upload(alice, "crane.txt", "The crane lifted forty containers before noon.", cid)
    upload(alice, "default.txt", "A note about the quince jam in the default collection.")
    client = v1(alice)

    found = client.get(f"/v1/vector_stores/{store}").json()
    assert found["file_counts"] == {"in_progress": 0, "completed": 2, "failed": 0, "cancelled": 0, "total": 2}
    listed = store_files(client, store)
    assert {f["document_id"] for f in listed} == api_listed(alice, cid)
    assert all(f["id"].startswith("file-") and f["status"] == "completed" for f in listed)

    # Search names a file id that every /v1 lookup answers for.
    hits = client.post(f"/v1/vector_stores/{store}/search", {"query": "harbour tide"}, format="json")
    assert hits.status_code == 200, hits.content
    hit = hits.json()["data"][0]
    assert hit["filename"] == "harbour.txt"
    file_id = hit["file_id"]
    as_file = client.get(f"/v1/files/{file_id}")
    assert as_file.status_code == 200, as_file.content
    assert (as_file.json()["id"], as_file.json()["filename"]) == (file_id, "harbour.txt")
    in_store = client.get(f"/v1/vector_stores/{store}/files/{file_id}")
    assert in_store.status_code == 200, in_store.content
    assert (in_store.json()["document_id"], in_store.json()["status"]) == (harbour, "completed")

    # A document's file goes with its document, through its store, never alone.
    refused = client.delete(f"/v1/files/{file_id}")
    assert refused.status_code == 400, refused.content
    assert refused.json()["error"]["code"] == "file_in_vector_store"
    assert store in refused.json()["error"]["message"]
    assert harbour in api_listed(alice, cid)

    removed = client.delete(f"/v1/vector_stores/{store}/files/{file_id}")
    assert removed.status_code == 200, removed.content
    assert harbour not in api_listed(alice, cid)
    assert client.get(f"/v1/files/{file_id}").status_code == 404
    assert client.get(f"/v1/vector_stores/{store}").json()["file_counts"]["total"] == 1
    assert {f["document_id"] for f in store_files(client, store)} == api_listed(alice, cid)


def test_the_default_collection_is_a_store_with_its_documents(alice: Caller) -> None:
    document = upload(alice, "quince.txt", "The quince jam set after forty minutes of boiling.")
    default = next(c for c in alice.client.get("/api/collections").json() if c["is_default"])
    store = f"vs_{default['id'].replace('-', '')}"
    client = v1(alice)
    assert client.get(f"/v1/vector_stores/{store}").json()["file_counts"]["total"] == 1
    listed = store_files(client, store)
    assert [f["document_id"] for f in listed] == [document]
    hit = client.post(f"/v1/vector_stores/{store}/search", {"query": "quince jam"}, format="json").json()
    assert hit["data"][0]["file_id"] == listed[0]["id"]
    assert client.get(f"/v1/files/{listed[0]['id']}").json()["filename"] == "quince.txt"


def test_files_attached_through_v1_are_listed_by_api(alice: Caller) -> None:
    client = v1(alice)
    store = client.post("/v1/vector_stores", {"name": "Mixed"}, format="json").json()["id"]
    cid = next(c["id"] for c in alice.client.get("/api/collections").json() if c["name"] == "Mixed")
    upload(alice, "api.txt", "Uploaded through the REST API into the mixed store.", cid)
    made = client.post(
        "/v1/files",
        {
            "file": SimpleUploadedFile("sdk.txt", b"Attached through the vector store API."),
            "purpose": "assistants",
        },
        format="multipart",
    ).json()
    attached = client.post(f"/v1/vector_stores/{store}/files", {"file_id": made["id"]}, format="json").json()
    assert attached["id"] == made["id"]  # the file object's id, as OpenAI
    drive(attached["job_id"])
    listed = store_files(client, store)
    assert {f["document_id"] for f in listed} == api_listed(alice, cid)
    assert len(listed) == 2 and made["id"] in {f["id"] for f in listed}


def test_a_store_file_reports_the_chunk_sizes_the_chunker_used(alice: Caller, settings: Any) -> None:
    client = v1(alice)
    static = {"type": "static", "static": {"max_chunk_size_tokens": 300, "chunk_overlap_tokens": 50}}
    store = client.post("/v1/vector_stores", {"name": "Sizes"}, format="json").json()["id"]
    made = [
        client.post(
            "/v1/files",
            {"file": SimpleUploadedFile(f"{n}.txt", b"Some words to chunk."), "purpose": "assistants"},
            format="multipart",
        ).json()["id"]
        for n in ("auto", "static")
    ]
    auto = client.post(f"/v1/vector_stores/{store}/files", {"file_id": made[0]}, format="json").json()
    sized = client.post(
        f"/v1/vector_stores/{store}/files", {"file_id": made[1], "chunking_strategy": static}, format="json"
    ).json()
    assert sized["chunking_strategy"] == static
    assert auto["chunking_strategy"] == {
        "type": "static",
        "static": {
            "max_chunk_size_tokens": int(django_settings.CHUNK_MAX_TOKENS),
            "chunk_overlap_tokens": 0,
        },
    }
    retrieved = client.get(f"/v1/vector_stores/{store}/files/{made[1]}").json()
    assert retrieved["chunking_strategy"] == static

    # Once chunked, a file keeps reporting the sizes its chunks were cut with.
    drive(auto["job_id"])
    drive(sized["job_id"])
    used = auto["chunking_strategy"]
    settings.CHUNK_MAX_TOKENS = int(django_settings.CHUNK_MAX_TOKENS) + 100
    for file_id, expected in ((made[0], used), (made[1], static)):
        answer = client.get(f"/v1/vector_stores/{store}/files/{file_id}").json()
        assert (answer["status"], answer["chunking_strategy"]) == ("completed", expected)


def test_before_its_chunks_are_cut_a_file_reports_the_sizes_they_will_be_cut_with(
    alice: Caller, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace's embedder bounds the settings' sizes (by the sizes it ranks best at, as e5
    # declares, and by its window): the answer while the file waits is the one it gives when done.
    settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS = 350, 500
    monkeypatch.setattr(HashingEmbedder, "chunk_tokens", (60, 80), raising=False)
    client = v1(alice)
    store = client.post("/v1/vector_stores", {"name": "Planned"}, format="json").json()["id"]
    text = " ".join(f"The keeper of lighthouse {n} wrote down the weather." for n in range(60))
    made = client.post(
        "/v1/files",
        {"file": SimpleUploadedFile("keeper.txt", text.encode()), "purpose": "assistants"},
        format="multipart",
    ).json()["id"]
    attached = client.post(f"/v1/vector_stores/{store}/files", {"file_id": made}, format="json").json()
    planned = {"type": "static", "static": {"max_chunk_size_tokens": 80, "chunk_overlap_tokens": 0}}
    waiting = client.get(f"/v1/vector_stores/{store}/files/{made}").json()
    assert (attached["chunking_strategy"], waiting["status"]) == (planned, "in_progress")
    assert waiting["chunking_strategy"] == planned
    assert store_files(client, store)[0]["chunking_strategy"] == planned

    drive(attached["job_id"])
    done = client.get(f"/v1/vector_stores/{store}/files/{made}").json()
    assert (done["status"], done["chunking_strategy"]) == ("completed", planned)
    version = DocumentVersion.objects.get(document_id=done["document_id"])
    assert version.chunking is not None and version.chunking["max_chunk_size_tokens"] == 80
    assert version.chunks.count() > 3


def test_a_version_made_from_a_copy_records_the_sizes_of_the_chunks_it_copied(alice: Caller) -> None:
    text = "The ferry left the quay at nine and returned before the fog."
    first, second = upload(alice, "a.txt", text), upload(alice, "b.txt", text)
    versions = {v.document_id: v for v in DocumentVersion.objects.all()}
    copied = versions[uuid.UUID(second)]
    assert copied.reused_from_id == versions[uuid.UUID(first)].pk  # dedup copied the chunks
    assert copied.chunking is not None and copied.chunking == versions[uuid.UUID(first)].chunking
