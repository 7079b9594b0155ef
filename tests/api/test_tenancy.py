"""Tenancy: a user of another tenant walks every route with real ids and finds nothing.

Another tenant's ids answer exactly (byte for byte) what ids that do not exist answer, so a
caller cannot even learn that they exist; and nothing of the other tenant changes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.models import Document, DocumentVersion
from jobs.models import Job, JobEvent, Status
from tests.api.conftest import TEXT, Caller, assert_error, drive, lose_the_worker_until_failed

pytestmark = pytest.mark.django_db(transaction=True)

JOB_ROUTES = {
    "status": ("get", ""),
    "cancel": ("post", "/cancel"),
    "retry": ("post", "/retry"),
    "events": ("get", "/events"),
}


@pytest.fixture
def acme(alice: Caller) -> dict[str, dict[str, Any]]:
    """Alice's tenant: a published document, a failed job she may retry, a queued job."""
    ready = alice.uploaded(TEXT, "harbor.txt", title="Harbor")
    assert drive(ready["job_id"]).status == Status.READY
    failed = alice.uploaded(TEXT + b"Second file.", "second.txt")
    assert lose_the_worker_until_failed(failed["job_id"]).status == Status.FAILED
    queued = alice.uploaded(TEXT + b"Third file.", "third.txt")
    assert alice.client.get("/api/search", {"q": "harbor"}).json()["results"]
    return {"ready": ready, "failed": failed, "queued": queued}


def snapshot() -> tuple[list[tuple[Any, ...]], int, int, list[tuple[Any, ...]]]:
    jobs = list(Job.objects.order_by("pk").values_list("pk", "status", "version"))
    documents = list(Document.objects.order_by("pk").values_list("pk", "title", "attributes"))
    return jobs, DocumentVersion.objects.count(), JobEvent.objects.count(), documents


def call(caller: Caller, method: str, url: str) -> Any:
    if url.endswith("/versions/"):
        return caller.client.post(url, {"file": SimpleUploadedFile("v.txt", TEXT + b"!")}, format="multipart")
    if method == "patch":
        return caller.client.patch(url, {"title": "Owned", "attributes": {"owned": True}}, format="json")
    return getattr(caller.client, method)(url)


def test_another_tenant_walks_every_route_and_finds_nothing(acme: dict[str, dict[str, Any]], mallory: Caller):
    own = mallory.uploaded(b"Globex quarterly memo about widgets.\n", "memo.txt")
    before = snapshot()
    unknown_doc, unknown_job = str(uuid.uuid4()), str(uuid.uuid4())

    # The list and the state filter show only the caller's own documents.
    listed = mallory.client.get("/api/documents/").json()
    assert [d["document_id"] for d in listed["results"]] == [own["document_id"]]
    assert listed["count"] == 1
    for state in ("ready", "parse_failed", "queued"):
        ids = [
            d["document_id"]
            for d in mallory.client.get("/api/documents/", {"state": state}).json()["results"]
        ]
        assert ids == ([own["document_id"]] if state == "queued" else [])

    # Search reads only the caller's tenant (which has nothing published).
    found = mallory.client.get("/api/search", {"q": "harbor tide", "k": "50"})
    assert found.status_code == 200
    assert found.json() == {"query": "harbor tide", "mode": "hybrid", "results": []}

    # Every route with an id: the other tenant's ids, unknown ids and malformed ids answer the
    # very same bytes.
    for name, body in acme.items():
        doc, job = body["document_id"], body["job_id"]
        doc_routes = {
            "detail": ("get", "/api/documents/{doc}/"),
            "versions": ("post", "/api/documents/{doc}/versions/"),
            "edit": ("patch", "/api/documents/{doc}/"),
        }
        for route, (method, template) in doc_routes.items():
            answers = {
                kind: call(mallory, method, template.format(doc=d))
                for kind, d in (("theirs", doc), ("unknown", unknown_doc), ("malformed", "not-a-uuid"))
            }
            assert_error(answers["theirs"], 404, "not_found")
            for kind, answer in answers.items():
                assert (answer.status_code, answer.content) == (404, answers["theirs"].content), (
                    name,
                    route,
                    kind,
                )
        for route, (method, suffix) in JOB_ROUTES.items():
            variants = {
                "theirs": (doc, job),
                "unknown": (unknown_doc, unknown_job),
                "unknown-job": (doc, unknown_job),
                "malformed": ("x", "y"),
                "own-doc-their-job": (own["document_id"], job),
                "their-doc-own-job": (doc, own["job_id"]),
            }
            answers = {
                kind: getattr(mallory.client, method)(f"/api/documents/{d}/jobs/{j}{suffix}")
                for kind, (d, j) in variants.items()
            }
            assert_error(answers["theirs"], 404, "not_found")
            for kind, answer in answers.items():
                assert (answer.status_code, answer.content) == (404, answers["theirs"].content), (
                    name,
                    route,
                    kind,
                )
                assert answer["Content-Type"] == answers["theirs"]["Content-Type"]

    # Nothing of alice's changed: no cancel, no retry, no new version, no event.
    assert snapshot() == before
    assert Job.objects.get(pk=acme["queued"]["job_id"]).status == Status.QUEUED
    assert Job.objects.get(pk=acme["failed"]["job_id"]).status == Status.FAILED


def test_the_owner_still_sees_everything(acme: dict[str, dict[str, Any]], alice: Caller, mallory: Caller):
    mallory.uploaded(b"Globex memo.\n", "memo.txt")
    listed = alice.client.get("/api/documents/").json()
    assert {d["document_id"] for d in listed["results"]} == {b["document_id"] for b in acme.values()}
    for body in acme.values():
        assert alice.client.get(body["status_url"]).status_code == 200
        assert alice.client.get(f"/api/documents/{body['document_id']}/").status_code == 200


def test_search_never_returns_another_tenants_content(acme: dict[str, dict[str, Any]], mallory: Caller):
    own = mallory.uploaded(b"The harbor of Globex is quiet; the tide is low.\n", "globex-harbor.txt")
    drive(own["job_id"])
    results = mallory.client.get("/api/search", {"q": "harbor tide", "k": "50"}).json()["results"]
    assert results
    assert {hit["document_id"] for hit in results} == {own["document_id"]}
