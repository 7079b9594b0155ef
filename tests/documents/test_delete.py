"""Deleting documents and versions through the API: gone from search and every list in the
request's commit, a running job stopped through the job services, then 0 derived rows and 0 stored
files; idempotent, 404 for another tenant, an audit record that stays. Runs on both databases."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from documents.embedders import configured_embedder
from documents.models import Deletion, Document, DocumentVersion
from documents.services.accounts import user_create_in_tenant
from documents.services.publish import OUTPUTS_BY_STAGE
from jobs.models import Job, JobEvent, Status
from tests.conftest import wait_for
from tests.documents import files
from tests.documents.helpers import (
    JobThread,
    Reply,
    embeddings_server,
    files_under,
    paused_after,
    run_until_idle,
    use_http_embeddings,
)

pytestmark = pytest.mark.django_db(transaction=True)

PHRASE = "Obsidian heron watches the salt marsh"
OTHER = "Cobalt tram climbs the northern hill"


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JOBS_HEARTBEAT_SECONDS = 0.1
    settings.DOCUMENTS_DELETE_AUDIT_GRACE = 0


def client_for(username: str, tenant: str) -> APIClient:
    client = APIClient()
    token = user_create_in_tenant(username=username, tenant_slug=tenant)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def alice() -> APIClient:
    return client_for("alice", "acme")


@pytest.fixture
def mallory() -> APIClient:
    return client_for("mallory", "globex")


def post(client: APIClient, data: bytes, name: str = "doc.pdf", document: str = "") -> dict[str, Any]:
    url = f"/api/documents/{document}/versions/" if document else "/api/documents/"
    response = client.post(url, {"file": SimpleUploadedFile(name, data)}, format="multipart")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def derived_rows(document_id: Any) -> int:
    """Rows in every output table registered with ``remove_outputs``, for any version of it."""
    versions = list(DocumentVersion.objects.filter(document_id=document_id).values_list("pk", flat=True))
    return sum(m.objects.filter(version_id__in=versions).count() for _, ms in OUTPUTS_BY_STAGE for m in ms)


def hit_ids(client: APIClient, query: str, mode: str = "hybrid") -> set[str]:
    response = client.get("/api/search", {"q": query, "k": "20", "mode": mode})
    assert response.status_code == 200
    return {hit["document_id"] for hit in response.json()["results"]}


def listed_ids(client: APIClient) -> set[str]:
    return {d["document_id"] for d in client.get("/api/documents/").json()["results"]}


def audit_leftovers() -> int:
    out = io.StringIO()
    with contextlib.suppress(SystemExit):  # check_jobs exits 1 on a violation
        call_command("check_jobs", stdout=out, stderr=io.StringIO())
    return out.getvalue().count("FAIL deleted_document_leftovers")


def assert_all_gone(
    client: APIClient, document_id: str, query: str, *, files_left: int = 0, mode: str = "hybrid"
) -> None:
    from django.conf import settings

    assert derived_rows(document_id) == 0
    assert not Document.objects.filter(pk=document_id).exists()
    assert not DocumentVersion.objects.filter(document_id=document_id).exists()
    assert len(files_under(Path(settings.MEDIA_ROOT))) == files_left
    assert document_id not in hit_ids(client, query, mode)
    assert document_id not in listed_ids(client)
    assert client.get(f"/api/documents/{document_id}/").status_code == 404
    assert audit_leftovers() == 0


def test_deleting_a_ready_document_removes_it_from_search_at_once_and_leaves_nothing(alice, settings):
    kept = post(alice, files.text_pdf([f"{OTHER}."]), "kept.pdf")
    run_until_idle(kept["job_id"])
    body = post(alice, files.text_pdf([f"{PHRASE}.", "Second page."]))
    assert run_until_idle(body["job_id"]).status == Status.READY
    doc = body["document_id"]
    assert doc in hit_ids(alice, PHRASE) and derived_rows(doc) > 0
    assert len(files_under(settings.MEDIA_ROOT)) == 2

    response = alice.delete(f"/api/documents/{doc}/")

    assert response.status_code == 204  # nothing was running: the cleanup finished after the commit
    assert_all_gone(alice, doc, PHRASE, files_left=1)  # the other document's bytes stay
    assert kept["document_id"] in hit_ids(alice, OTHER)
    deletion = Deletion.objects.get(document_id=doc)
    assert (deletion.requested_by_name, deletion.version_number) == ("alice", None)
    assert deletion.cleaned_at is not None and deletion.rows_removed > 0 and deletion.files_removed == 1


def test_deleting_a_queued_document_cancels_its_job_through_the_state_machine(alice, settings):
    body = post(alice, files.text_pdf([f"{PHRASE}."]))
    job = Job.objects.get(pk=body["job_id"])
    assert job.status == Status.QUEUED

    assert alice.delete(f"/api/documents/{body['document_id']}").status_code in (202, 204)

    job = Job.objects.get(pk=body["job_id"])
    assert job.status == Status.CANCELLED
    assert job.events.filter(name="cancel", reason="deleted").exists()
    assert run_until_idle(job.pk).status == Status.CANCELLED  # a late delivery runs nothing
    wait_for(lambda: Deletion.objects.filter(cleaned_at__isnull=False).exists(), timeout=10, what="cleanup")
    assert_all_gone(alice, body["document_id"], PHRASE)


# After indexing, the worker's next step is the publish: the delete's cancel must win over it.
@pytest.mark.parametrize("stage", ["chunking", "indexing"])
def test_deleting_a_running_document_stops_its_worker_then_cleans_up(alice, settings, stage):
    body = post(alice, files.text_pdf([f"{PHRASE}.", "Second page."]))
    doc = body["document_id"]
    with paused_after(stage) as gate:
        worker = JobThread(body["job_id"])
        worker.start()
        gate.wait_reached()
        assert derived_rows(doc) > 0

        response = alice.delete(f"/api/documents/{doc}")

        # Gone from every list in the request's commit, while the worker still holds the job.
        assert response.status_code == 202, response.content
        assert response.json()["cleanup"] == "pending"
        assert doc not in listed_ids(alice)
        assert alice.get(f"/api/documents/{doc}/").status_code == 404
        assert Job.objects.get(pk=body["job_id"]).status == Status.CANCEL_REQUESTED
        assert doc not in hit_ids(alice, PHRASE)
        # Rows wait for the worker to stop; past the grace (0 here) the audit reports them.
        assert derived_rows(doc) > 0 and audit_leftovers() == 1
        gate.release.set()
        worker.finish()
    assert Job.objects.get(pk=body["job_id"]).status == Status.CANCELLED
    assert not JobEvent.objects.filter(job_id=body["job_id"], name="publish").exists()  # never published
    assert Deletion.objects.get(document_id=doc).cleaned_at is not None
    assert_all_gone(alice, doc, PHRASE)


@pytest.fixture
def refused_embeddings(settings) -> Iterator[None]:
    with embeddings_server([], default=Reply(401)) as server:
        use_http_embeddings(settings, server)
        configured_embedder.cache_clear()
        yield
    configured_embedder.cache_clear()


@pytest.mark.usefixtures("refused_embeddings")
def test_deleting_a_failed_document_removes_the_outputs_kept_for_a_retry(alice, settings):
    body = post(alice, files.text_pdf([f"{PHRASE}.", "Second page."]))
    job = run_until_idle(body["job_id"])
    assert (job.status, job.stage) == (Status.FAILED, "embedding")
    assert derived_rows(body["document_id"]) > 0  # pages and chunks stay for a retry

    assert alice.delete(f"/api/documents/{body['document_id']}").status_code == 204

    # The refused embedder cannot embed the query either: search by words.
    assert_all_gone(alice, body["document_id"], PHRASE, mode="lexical")


def test_delete_is_idempotent_and_another_tenant_gets_404(alice, mallory, settings):
    body = post(alice, files.text_pdf([f"{PHRASE}."]))
    run_until_idle(body["job_id"])
    doc = body["document_id"]

    for url in (f"/api/documents/{doc}", f"/api/documents/{doc}/versions/1"):
        response = mallory.delete(url)
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert doc in hit_ids(alice, PHRASE)

    assert alice.delete(f"/api/documents/{doc}").status_code == 204
    assert alice.delete(f"/api/documents/{doc}").status_code == 204
    assert mallory.delete(f"/api/documents/{doc}").status_code == 404
    assert alice.delete("/api/documents/00000000-0000-0000-0000-000000000000").status_code == 404
    assert Deletion.objects.filter(document_id=doc).count() == 1


def test_a_version_delete_refuses_the_published_one_and_removes_another(alice, settings):
    first = post(alice, files.text_pdf([f"{PHRASE}."]))
    run_until_idle(first["job_id"])
    doc = first["document_id"]
    second = post(alice, files.text_pdf([f"{OTHER}."]), document=doc)  # queued, not published

    refused = alice.delete(f"/api/documents/{doc}/versions/1")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "version_published"

    assert alice.delete(f"/api/documents/{doc}/versions/2").status_code == 204
    assert Job.objects.get(pk=second["job_id"]).status == Status.CANCELLED
    assert [v["version"] for v in alice.get(f"/api/documents/{doc}/").json()["versions"]] == [1]
    assert alice.get(f"/api/documents/{doc}/jobs/{second['job_id']}").status_code == 404
    assert doc in hit_ids(alice, PHRASE)  # the published version is untouched
    assert len(files_under(settings.MEDIA_ROOT)) == 1
    assert alice.delete(f"/api/documents/{doc}/versions/2").status_code == 204
    assert alice.delete(f"/api/documents/{doc}/versions/7").status_code == 404
    assert audit_leftovers() == 0
