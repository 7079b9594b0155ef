"""Stored files on S3-compatible object storage (a real SeaweedFS, signed requests): every read
and write of stored bytes goes through the storage, so with ``STORAGE_BACKEND=s3`` an upload lands
in the bucket and never on this machine's disk, the parser reads it from there, downloads stream it
back, and delete, the retention sweep, process again and dedup work on the bucket's objects. Runs
on both databases."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from documents.models import DocumentVersion
from documents.services.storage import stored_bytes_sweep
from documents.stages.common import local_file
from jobs import pipelines
from jobs.context import StageContext
from jobs.models import Status
from jobs.services.lifecycle import job_cancel
from tests.api.conftest import TEXT, Caller, claim_at, drive
from tests.documents.helpers import files_under
from tests.documents.test_delete import audit_leftovers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PHRASE = b"Vermilion ferries cross the quiet fjord at dawn.\n"


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path, s3_media: Any) -> Path:
    """The local media folder exists but must stay empty: everything goes to the bucket."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DOCUMENTS_DELETE_AUDIT_GRACE = 0
    return Path(settings.MEDIA_ROOT)


def _hits(caller: Caller, query: str) -> set[str]:
    response = caller.client.get("/api/search", {"q": query, "k": "20", "mode": "lexical"})
    assert response.status_code == 200, response.content
    return {hit["document_id"] for hit in response.json()["results"]}


def _key(job_id: Any) -> str:
    return str(DocumentVersion.objects.get(job_id=job_id).file.name)


def test_an_upload_lives_in_the_bucket_is_searchable_and_its_object_goes_with_the_delete(
    alice: Caller, seaweed: Any, s3_bucket: str, media: Path
) -> None:
    body = alice.uploaded(TEXT + PHRASE, "fjord.txt")

    key = _key(body["job_id"])
    assert seaweed.keys(s3_bucket) == [key] and key.startswith("uploads/acme/")
    assert seaweed.read(s3_bucket, key) == TEXT + PHRASE
    assert drive(body["job_id"]).status == Status.READY  # parsed from the bucket's bytes
    assert body["document_id"] in _hits(alice, "vermilion ferries")
    assert files_under(media) == []

    assert alice.client.delete(f"/api/documents/{body['document_id']}/").status_code == 204

    assert seaweed.keys(s3_bucket) == []
    assert body["document_id"] not in _hits(alice, "vermilion ferries")
    assert audit_leftovers() == 0


def test_the_retention_sweep_removes_a_cancelled_versions_object(
    alice: Caller, seaweed: Any, s3_bucket: str, settings: Any
) -> None:
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 1
    kept = alice.uploaded(PHRASE, "kept.txt")
    drive(kept["job_id"])
    cancelled = alice.uploaded(TEXT, "stopped.txt")
    job_cancel(job_id=cancelled["job_id"], actor_name="alice")
    assert len(seaweed.keys(s3_bucket)) == 2

    assert stored_bytes_sweep(10) == []  # within the retention: kept for process again
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0
    freed = stored_bytes_sweep(10)

    version = DocumentVersion.objects.get(job_id=cancelled["job_id"])
    assert freed == [version.pk] and version.bytes_freed_at is not None
    assert seaweed.keys(s3_bucket) == [_key(kept["job_id"])]  # the published version's stays


def test_process_again_copies_the_stored_bytes_within_the_bucket(
    alice: Caller, seaweed: Any, s3_bucket: str, media: Path
) -> None:
    first = alice.uploaded(TEXT + PHRASE, "fjord.txt")
    job_cancel(job_id=first["job_id"], actor_name="alice")

    answer = alice.client.post(f"/api/documents/{first['document_id']}/versions/1/process-again")

    assert answer.status_code == 201, answer.content
    again = answer.json()
    old, new = _key(first["job_id"]), _key(again["job_id"])
    assert old != new and seaweed.keys(s3_bucket) == sorted([old, new])
    assert seaweed.read(s3_bucket, new) == TEXT + PHRASE
    assert drive(again["job_id"]).status == Status.READY
    assert first["document_id"] in _hits(alice, "vermilion ferries")
    assert files_under(media) == []


def test_identical_bytes_reuse_the_outputs_and_each_version_keeps_its_own_object(
    alice: Caller, seaweed: Any, s3_bucket: str
) -> None:
    first = alice.uploaded(TEXT + PHRASE, "fjord.txt")
    assert drive(first["job_id"]).status == Status.READY

    second = alice.uploaded(TEXT + PHRASE, "fjord again.txt")

    assert second["reused_from"] == {"document_id": first["document_id"], "version": 1}
    assert drive(second["job_id"]).status == Status.READY
    assert len(seaweed.keys(s3_bucket)) == 2
    assert alice.client.delete(f"/api/documents/{first['document_id']}/").status_code == 204
    assert seaweed.keys(s3_bucket) == [_key(second["job_id"])]
    assert _hits(alice, "vermilion ferries") == {second["document_id"]}


def test_v1_file_bytes_are_stored_in_the_bucket_and_downloaded_back_from_it(
    alice: Caller, seaweed: Any, s3_bucket: str, media: Path
) -> None:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    data = bytes(range(256)) * 12_000  # about 3 MB: past the storage's in-memory read size

    created = client.post("/v1/files", {"file": SimpleUploadedFile("blob.bin", data), "purpose": "user_data"})

    assert created.status_code == 200, created.content
    file_id = created.json()["id"]
    (key,) = seaweed.keys(s3_bucket)
    assert key.startswith("v1files/") and seaweed.read(s3_bucket, key) == data
    download = client.get(f"/v1/files/{file_id}/content")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == data  # type: ignore[attr-defined]
    assert files_under(media) == []
    assert client.delete(f"/v1/files/{file_id}").status_code == 200
    assert seaweed.keys(s3_bucket) == []


def test_the_parser_gets_a_private_copy_of_a_large_upload_removed_with_its_attempt(
    alice: Caller, seaweed: Any, s3_bucket: str
) -> None:
    data = (TEXT + PHRASE) * 60_000  # about 8 MB
    body = alice.uploaded(data, "long.txt")
    claim = claim_at(body["job_id"], "parsing")
    pipeline = pipelines.get(claim.job.kind)
    ctx = StageContext(claim, pipeline, pipeline.stage(claim.job.stage))
    version = DocumentVersion.objects.get(job_id=body["job_id"])

    path = local_file(ctx, version)

    attempt_dir = ctx.temp_dir
    assert path.parent == attempt_dir and path.read_bytes() == data
    ctx.close()
    assert not attempt_dir.exists()


def test_a_stored_object_left_after_a_delete_is_reported_by_check_jobs(
    alice: Caller, seaweed: Any, s3_bucket: str
) -> None:
    body = alice.uploaded(TEXT, "notes.txt")
    version = DocumentVersion.objects.get(job_id=body["job_id"])
    # A delete whose cleanup never ran (the row marked, the object still there).
    DocumentVersion.objects.filter(pk=version.pk).update(deleted_at=timezone.now() - timedelta(hours=1))

    assert audit_leftovers() == 1
    assert seaweed.keys(s3_bucket) == [version.file.name]
