"""Process again through the API: a cancelled or failed version's stored bytes become the next
version with a new job; the old version and job stay as they were (one job per version)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from documents.models import Document, DocumentVersion
from jobs.models import Job, JobEvent, Status
from jobs.services.lifecycle import job_cancel
from tests.api.conftest import STATUS_KEYS, TEXT, Caller, assert_error, drive, lose_the_worker_until_failed
from tests.documents.files import encrypted_pdf

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def _again(caller: Caller, document_id: str, number: int, slash: str = "") -> Any:
    return caller.client.post(f"/api/documents/{document_id}/versions/{number}/process-again{slash}")


def _cancelled(alice: Caller) -> dict[str, Any]:
    body = alice.upload(TEXT, "harbor notes.txt", title="Harbor notes").json()
    job_cancel(job_id=body["job_id"], actor_name="alice")
    return body


def test_a_cancelled_version_is_processed_again_as_a_new_version_from_its_stored_bytes(alice: Caller):
    first = _cancelled(alice)
    old = DocumentVersion.objects.get(job_id=first["job_id"])
    assert alice.client.get(first["status_url"]).json()["can_process_again"] is True

    answer = _again(alice, first["document_id"], 1)

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert set(body) == STATUS_KEYS
    assert body["version"] == 2 and body["status"] == Status.QUEUED and body["job_id"] != first["job_id"]
    new = DocumentVersion.objects.get(job_id=body["job_id"])
    assert new.file.name != old.file.name  # its own copy: deleting either keeps the other's bytes
    with new.file.open("rb") as copy:
        assert copy.read() == TEXT
    assert (new.sha256, new.original_name, new.kind) == (old.sha256, old.original_name, old.kind)
    # History stays: the old job is still cancelled, its version still there with its bytes.
    assert Job.objects.get(pk=first["job_id"]).status == Status.CANCELLED
    assert old.file.name and old.file.storage.exists(old.file.name)
    document = Document.objects.get(pk=first["document_id"])
    assert document.latest_version_id == new.pk and document.title == "Harbor notes"
    assert JobEvent.objects.filter(job_id=body["job_id"], reason="processing v1 again").exists()
    # The new job runs to the end and the document becomes searchable.
    assert drive(body["job_id"]).status == Status.READY
    hits = alice.client.get("/api/search", {"q": "amber falcons"}).json()["results"]
    assert [h["version"] for h in hits if h["document_id"] == first["document_id"]][:1] == [2]


def test_a_failed_version_is_processed_again_and_the_slash_form_is_accepted(alice: Caller):
    body = alice.upload(TEXT, "notes.txt").json()
    assert lose_the_worker_until_failed(body["job_id"]).error_code == "worker_lost"
    assert alice.client.get(body["status_url"]).json()["can_process_again"] is True
    answer = _again(alice, body["document_id"], 1, slash="/")
    assert answer.status_code == 201, answer.content
    assert answer.json()["version"] == 2


@pytest.mark.parametrize(
    ("data", "name", "code"),
    [
        (b"%PDF-1.7\n" + bytes(range(256)) * 4, "broken.pdf", "corrupt_input"),
        (None, "locked.pdf", "encrypted_input"),
    ],
    ids=["corrupt_input", "encrypted_input"],
)
def test_a_failure_only_new_bytes_fix_offers_only_a_corrected_copy(
    alice: Caller, data: bytes | None, name: str, code: str
):
    body = alice.upload(data or encrypted_pdf(), name).json()
    job = drive(body["job_id"])
    assert (job.status, job.error_code) == (Status.FAILED, code)
    status = alice.client.get(body["status_url"]).json()
    assert status["can_process_again"] is False and status["error"]["action"] == "reupload"

    error = assert_error(_again(alice, body["document_id"], 1), 409, "not_allowed")

    assert error["message"].startswith("Processing the same file again would fail the same way. ")
    assert DocumentVersion.objects.filter(document_id=body["document_id"]).count() == 1


@pytest.mark.parametrize(("state", "label"), [("queued", "Queued"), ("ready", "Ready")])
def test_a_version_neither_cancelled_nor_failed_answers_409_with_the_tables_reason(
    alice: Caller, state: str, label: str
):
    body = alice.upload(TEXT, "notes.txt").json()
    if state == "ready":
        drive(body["job_id"])
    answer = _again(alice, body["document_id"], 1)
    error = assert_error(answer, 409, "not_allowed")
    expected = f"Only a cancelled or failed version can be processed again; this one is “{label}”."
    assert error["message"] == expected
    assert DocumentVersion.objects.filter(document_id=body["document_id"]).count() == 1


def test_only_the_latest_version_is_processed_again(alice: Caller):
    first = _cancelled(alice)
    assert _again(alice, first["document_id"], 1).status_code == 201
    # A second click (or a second tab) on v1 makes no third version.
    error = assert_error(_again(alice, first["document_id"], 1), 409, "not_allowed")
    assert "only the latest version" in error["message"]
    assert DocumentVersion.objects.filter(document_id=first["document_id"]).count() == 2


def test_another_tenants_version_is_not_found(alice: Caller, mallory: Caller):
    first = _cancelled(alice)
    assert_error(_again(mallory, first["document_id"], 1), 404, "not_found")
    assert_error(_again(alice, first["document_id"], 9), 404, "not_found")
    assert DocumentVersion.objects.filter(document_id=first["document_id"]).count() == 1
