"""Access lists on batches and /v1 file objects: a batch answers with the counts and files of
the documents the caller may see (a cancel reaches only those); a /v1 file object is its
uploader's until a document the caller may see is made from it, and any other id answers as a
missing one on every /v1 route."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from documents.models import Batch, FileObject
from jobs.models import Job, Status
from tests.api.conftest import TEXT, Caller, assert_error, drive

pytestmark = pytest.mark.django_db

NOT_A_DOCUMENT = b"MZ\x90\x00\x03" + bytes(200)


def user_id(caller: Caller) -> int:
    return int(get_user_model().objects.get(username=caller.username).pk)


def bearer(caller: Caller) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {caller.token}")
    return client


def counts(body: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in body["file_counts"].items() if v}


@pytest.fixture
def callers(make_caller: Any) -> tuple[Caller, Caller]:
    return make_caller("alice", "acme"), make_caller("bob", "acme")


def test_a_batch_answer_counts_and_names_only_the_documents_the_caller_may_see(callers):
    alice, bob = callers
    files = [
        SimpleUploadedFile("salaries.txt", TEXT + b"One."),
        SimpleUploadedFile("tool.exe", NOT_A_DOCUMENT),
        SimpleUploadedFile("bonuses.txt", TEXT + b"Two."),
    ]
    made = alice.client.post(
        "/api/batches", {"files": files, "access": f"user:{user_id(alice)}"}, format="multipart"
    )
    assert made.status_code == 201, made.content
    batch = made.json()
    url = f"/api/batches/{batch['batch_id']}"
    first, _, second = batch["documents"]

    assert counts(alice.client.get(url).json()) == {"queued": 2, "total": 2, "rejected": 1}
    seen = bob.client.get(url).json()
    assert counts(seen) == {"rejected": 1}  # the refused file made no document: it has no list
    assert [d["filename"] for d in seen["documents"]] == ["tool.exe"]
    for hidden in (first, second):
        assert hidden["document_id"] not in str(seen) and hidden["job_id"] not in str(seen)

    # A cancel reaches only what the caller may see: here nothing, as a finished batch answers.
    assert_error(bob.client.post(f"{url}/cancel"), 409, "not_allowed")
    assert set(
        Job.objects.filter(pk__in=[first["job_id"], second["job_id"]]).values_list("status", flat=True)
    ) == {Status.QUEUED}
    assert Batch.objects.get(pk=batch["batch_id"]).cancel_requested_at is None

    # Opened to bob, one document shows up in his answer (and its counts) on the next request.
    opened = alice.client.put(
        f"/api/documents/{first['document_id']}/access",
        {"inherit": False, "principals": [f"user:{user_id(alice)}", f"user:{user_id(bob)}"]},
        format="json",
    )
    assert opened.status_code == 200, opened.content
    drive(first["job_id"])
    seen = bob.client.get(url).json()
    assert counts(seen) == {"ready": 1, "total": 1, "rejected": 1}
    assert [d.get("document_id") for d in seen["documents"]] == [first["document_id"], None]
    cancelled = bob.client.post(f"{url}/cancel")
    assert cancelled.status_code == 409  # his one document finished; alice's queued one is not his to cancel
    assert Job.objects.get(pk=second["job_id"]).status == Status.QUEUED


def test_v1_file_objects_are_seen_by_their_uploader_and_by_who_may_see_a_document_made_of_them(callers):
    alice, bob = callers
    mine, theirs = bearer(alice), bearer(bob)

    def uploaded(name: str, purpose: str) -> str:
        answer = mine.post("/v1/files", {"file": SimpleUploadedFile(name, TEXT), "purpose": purpose})
        assert answer.status_code == 200, answer.content
        return str(answer.json()["id"])

    shared, private = uploaded("plan.txt", "assistants"), uploaded("salaries.txt", "user_data")
    missing = "file-" + uuid.uuid4().hex
    assert [f["id"] for f in mine.get("/v1/files").json()["data"]] == [private, shared]

    assert theirs.get("/v1/files").json()["data"] == []
    for file_id in (shared, private):
        for method, url in (
            ("get", "/v1/files/{}"),
            ("get", "/v1/files/{}/content"),
            ("delete", "/v1/files/{}"),
        ):
            seen = getattr(theirs, method)(url.format(file_id))
            unknown = getattr(theirs, method)(url.format(missing))
            assert seen.status_code == unknown.status_code == 404, (url, seen.content)
            assert seen.content.decode().replace(file_id, missing) == unknown.content.decode()
    assert FileObject.objects.filter(pk__in=[shared, private]).count() == 2  # bob deleted nothing

    # Bob cannot make a document of alice's bytes in a store of his own.
    store = theirs.post("/v1/vector_stores", {"name": "Bob's"}, format="json").json()["id"]
    refused = theirs.post(f"/v1/vector_stores/{store}/files", {"file_id": private}, format="json")
    assert refused.status_code == 404 and refused.json()["error"]["param"] == "file_id", refused.content
    assert theirs.get(f"/v1/vector_stores/{store}").json()["file_counts"]["total"] == 0

    # Attached for everyone, the shared file is his to see; the private one stays alice's.
    team = mine.post("/v1/vector_stores", {"name": "Team"}, format="json").json()["id"]
    assert mine.post(f"/v1/vector_stores/{team}/files", {"file_id": shared}, format="json").status_code == 200
    body = {"file_id": private, "access": [f"user:{user_id(alice)}"]}
    assert mine.post(f"/v1/vector_stores/{team}/files", body, format="json").status_code == 200
    assert [f["id"] for f in theirs.get("/v1/files").json()["data"]] == [shared]
    assert theirs.get(f"/v1/files/{shared}").json()["filename"] == "plan.txt"
    assert theirs.get(f"/v1/files/{private}").status_code == 404
    assert theirs.get(f"/v1/vector_stores/{team}").json()["file_counts"]["total"] == 1


def test_a_v1_file_batch_cancel_leaves_the_files_the_caller_may_not_see(callers):
    alice, bob = callers
    mine = bearer(alice)
    store = mine.post("/v1/vector_stores", {"name": "Team"}, format="json").json()["id"]
    ids = [
        mine.post(
            "/v1/files", {"file": SimpleUploadedFile(f"{n}.txt", TEXT), "purpose": "assistants"}
        ).json()["id"]
        for n in ("a", "b")
    ]
    files = [{"file_id": ids[0]}, {"file_id": ids[1], "access": [f"user:{user_id(alice)}"]}]
    batch = mine.post(f"/v1/vector_stores/{store}/file_batches", {"files": files}, format="json").json()
    assert batch["file_counts"]["total"] == 2
    url = f"/v1/vector_stores/{store}/file_batches/{batch['id']}"

    assert bearer(bob).get(url).json()["file_counts"]["total"] == 1
    cancelled = bearer(bob).post(f"{url}/cancel").json()
    assert cancelled["file_counts"] == {
        "in_progress": 0,
        "completed": 0,
        "failed": 0,
        "cancelled": 1,
        "total": 1,
    }
    states = {f["id"]: f["status"] for f in mine.get(f"{url}/files").json()["data"]}
    assert states == {ids[0]: "cancelled", ids[1]: "in_progress"}
