"""Stored bytes through the API and the pages: the byte quota's 413 (REST, /v1 files), usage
where documents are listed, and a freed version's reason for refusing retry and process again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.models import Document, DocumentVersion, Tenant
from documents.services.storage import stored_bytes_sweep
from jobs.services.lifecycle import job_cancel
from tests.api.conftest import TEXT, Caller, assert_error, lose_the_worker_until_failed
from tests.documents.helpers import files_under

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def _limit(caller: Caller, limit: int | None) -> None:
    Tenant.objects.filter(slug=caller.tenant).update(max_storage_bytes=limit)


def test_an_upload_past_the_quota_answers_413_with_usage_and_what_to_do(alice: Caller, media: Path) -> None:
    _limit(alice, len(TEXT) + 5)
    alice.uploaded(TEXT, "first.txt")
    stored = files_under(media)

    error = assert_error(alice.upload(TEXT + b"more", "second.txt"), 413, "storage_quota_exceeded")

    assert "limit" in error["message"] and "Delete documents" in error["message"]
    assert Document.objects.count() == 1 and files_under(media) == stored


def test_the_documents_list_shows_usage_and_limit(alice: Caller, mallory: Caller) -> None:
    _limit(alice, 10_000)
    alice.uploaded(TEXT)
    mallory.uploaded(b"Someone else's notes, longer than alice's.\n" * 3)

    body = alice.client.get("/api/documents/").json()

    assert body["storage"] == {"used_bytes": len(TEXT), "limit_bytes": 10_000}
    _limit(alice, 0)
    assert alice.client.get("/api/documents").json()["storage"]["limit_bytes"] is None


def test_v1_files_past_the_quota_answer_413_storage_quota_exceeded(alice: Caller, media: Path) -> None:
    _limit(alice, len(TEXT) + 5)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {alice.token}")

    def post(name: str) -> Any:
        return client.post("/v1/files", {"file": SimpleUploadedFile(name, TEXT), "purpose": "assistants"})

    assert post("a.txt").status_code == 200
    answer = post("b.txt")

    assert answer.status_code == 413, answer.content
    assert answer.json()["error"]["code"] == "storage_quota_exceeded"
    assert len(files_under(media)) == 1


def test_a_freed_version_says_why_process_again_is_refused(alice: Caller, settings: Any) -> None:
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0
    body = alice.uploaded(TEXT)
    job_cancel(job_id=body["job_id"], actor_name="alice")
    status = alice.client.get(body["status_url"]).json()
    assert status["can_process_again"] is True and status["bytes_kept_until"] is not None

    stored_bytes_sweep(10)

    status = alice.client.get(body["status_url"]).json()
    assert status["can_process_again"] is False
    assert status["bytes_freed_at"] is not None and status["bytes_kept_until"] is None
    answer = alice.client.post(f"/api/documents/{body['document_id']}/versions/1/process-again")
    error = assert_error(answer, 409, "not_allowed")
    assert "was removed on" in error["message"] and "Upload the file again" in error["message"]
    assert DocumentVersion.objects.count() == 1


def test_a_freed_version_cannot_be_retried_and_the_answer_says_why(alice: Caller, settings: Any) -> None:
    body = alice.uploaded(TEXT)
    lose_the_worker_until_failed(body["job_id"])  # worker_lost: a cause users may retry
    assert alice.client.get(body["status_url"]).json()["can_retry"] is True
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0

    stored_bytes_sweep(10)

    assert alice.client.get(body["status_url"]).json()["can_retry"] is False
    error = assert_error(alice.client.post(f"{body['status_url']}/retry"), 409, "not_allowed")
    assert "was removed on" in error["message"]


def test_the_pages_show_usage_and_the_freed_notice(alice: Caller, settings: Any) -> None:
    from django.contrib.auth import get_user_model

    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0
    _limit(alice, 2 * 1024 * 1024)
    body = alice.uploaded(TEXT)
    job_cancel(job_id=body["job_id"], actor_name="alice")
    page = Client()
    page.force_login(get_user_model().objects.get(username="alice"))

    listing = page.get("/").content.decode()
    assert f"Storage: {len(TEXT)}\xa0bytes of 2.0\xa0MB used" in listing
    detail = page.get(f"/documents/{body['document_id']}/").content.decode()
    assert "is kept until" in detail

    stored_bytes_sweep(10)

    detail = page.get(f"/documents/{body['document_id']}/").content.decode()
    assert "was removed on" in detail and "upload the file again" in detail
