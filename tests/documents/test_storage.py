"""Stored bytes: the reaper frees those of cancelled, failed and superseded versions after the
retention (and never a published version's, nor a file another live version names), freed
versions refuse retry and "process again" with the reason, and the per-tenant byte quota refuses
an upload before its bytes are stored, leaving nothing behind. Runs on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage

from documents.models import Document, DocumentVersion, FileObject
from documents.services.batches import Upload as BatchFile
from documents.services.batches import batch_create
from documents.services.files import FileInputError, file_create
from documents.services.process_again import version_process_again
from documents.services.storage import (
    STORAGE_QUOTA_EXCEEDED,
    StorageQuotaExceeded,
    storage_used,
    stored_bytes_sweep,
)
from documents.services.upload import UploadResult
from jobs import rules
from jobs.errors import TransitionRefused
from jobs.models import Job, Status
from jobs.services.lifecycle import job_cancel
from jobs.services.reaper import reap
from tests.documents import files
from tests.documents.helpers import files_under, make_tenant, run_until_idle, upload
from tests.ops.conftest import Clock

pytestmark = pytest.mark.django_db

DAY = 24 * 3600
TEXT = b"Storage notes: the tide was high and the amber falcons flew north.\n"


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 7
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def clock() -> Iterator[Clock]:
    from unittest import mock

    c = Clock()
    with mock.patch("django.utils.timezone.now", c):
        yield c


def jid(result: UploadResult) -> Any:
    assert result.job is not None
    return result.job.pk


def _name(version: DocumentVersion) -> str:
    return str(DocumentVersion.objects.get(pk=version.pk).file.name)


def _stored(version: DocumentVersion) -> bool:
    return default_storage.exists(_name(version))


def _freed_at(version: DocumentVersion) -> Any:
    return DocumentVersion.objects.get(pk=version.pk).bytes_freed_at


def test_the_reaper_frees_a_cancelled_versions_bytes_only_after_the_retention(clock: Clock) -> None:
    tenant = make_tenant()
    result = upload(tenant, TEXT, "notes.txt")
    job_cancel(job_id=jid(result), actor_name="alice")
    assert storage_used(tenant) == len(TEXT)  # cancelled bytes still count

    clock.advance(7 * DAY - 60)
    assert reap().swept == [] and _stored(result.version)

    clock.advance(120)
    report = reap()

    assert report.swept == [result.version.pk]
    assert not _stored(result.version)
    assert _freed_at(result.version) == clock.now
    assert storage_used(tenant) == 0
    # The row, its job and its history stay; a second pass has nothing left to do.
    assert Job.objects.get(pk=jid(result)).status == Status.CANCELLED
    assert reap().swept == []


def test_retention_zero_frees_a_failed_versions_bytes_at_the_next_pass(settings: Any, media: Path) -> None:
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0
    tenant = make_tenant()
    result = upload(tenant, files.encrypted_pdf(), "locked.pdf")
    assert run_until_idle(jid(result)).status == Status.FAILED

    assert stored_bytes_sweep(10) == [result.version.pk]
    assert files_under(media) == []


def test_a_running_or_published_version_keeps_its_bytes_and_a_superseded_one_loses_them(clock: Clock) -> None:
    tenant = make_tenant()
    first = upload(tenant, TEXT, "notes.txt")
    assert run_until_idle(jid(first)).status == Status.READY
    second = upload(tenant, TEXT + b"More.\n", "notes.txt", document=first.document)
    third_doc = upload(tenant, b"Queued and never run.\n", "queued.txt")

    clock.advance(30 * DAY)
    assert reap().swept == []  # nothing ended: v1 is published, the others wait for a worker

    assert run_until_idle(jid(second)).status == Status.READY  # v1 superseded now
    clock.advance(7 * DAY + 1)
    assert reap().swept == [first.version.pk]

    assert not _stored(first.version)
    assert _stored(second.version) and _stored(third_doc.version)
    assert Document.objects.get(pk=first.document.pk).published_version_id == second.version.pk


def test_freeing_a_copy_keeps_identical_bytes_of_a_live_version(clock: Clock) -> None:
    """Dedup: the same bytes, published in one document and cancelled in another; freeing the
    cancelled copy leaves the published one's bytes (and its reuse by later uploads) intact."""
    tenant = make_tenant()
    live = upload(tenant, TEXT, "live.txt")
    assert run_until_idle(jid(live)).status == Status.READY
    copy = upload(tenant, TEXT, "copy.txt")
    assert copy.version.reused_from_id == live.version.pk
    job_cancel(job_id=jid(copy), actor_name="alice")

    clock.advance(8 * DAY)
    assert reap().swept == [copy.version.pk]

    assert _stored(live.version) and not _stored(copy.version)
    with default_storage.open(_name(live.version), "rb") as kept:
        assert kept.read() == TEXT


def test_a_file_another_unfreed_version_names_is_never_removed(clock: Clock) -> None:
    """The guard behind every removal (retention and delete): a stored name shared by two rows
    goes with the last of them. Each upload stores its own file today, so the sharing is set up
    by pointing the second row at the first row's file."""
    tenant = make_tenant()
    first = upload(tenant, TEXT, "a.txt")
    second = upload(tenant, TEXT, "b.txt")
    own = _name(second.version)
    DocumentVersion.objects.filter(pk=second.version.pk).update(file=_name(first.version))
    default_storage.delete(own)
    job_cancel(job_id=jid(first), actor_name="alice")
    assert storage_used(tenant) == len(TEXT)  # one stored file, counted once

    clock.advance(8 * DAY)
    assert reap().swept == [first.version.pk]

    assert _freed_at(first.version) is not None
    assert default_storage.exists(_name(first.version))  # the queued second version reads it


def test_a_freed_version_refuses_process_again_and_retry_with_the_reason(settings: Any) -> None:
    settings.DOCUMENTS_STORAGE_RETENTION_DAYS = 0
    tenant = make_tenant()
    result = upload(tenant, files.encrypted_pdf(), "locked.pdf")
    job = run_until_idle(jid(result))
    assert job.status == Status.FAILED
    assert rules.allowed("force_retry", job)
    # The same bytes would fail the same way: a corrected copy, not process again, is the way.
    assert "would fail the same way" in (rules.refusal("process_again", job) or "")

    stored_bytes_sweep(10)

    job = Job.objects.get(pk=job.pk)
    for action in ("process_again", "force_retry"):
        reason = rules.refusal(action, job)
        assert reason is not None and "was removed on" in reason and "Upload the file again" in reason
    with pytest.raises(TransitionRefused, match="was removed on"):
        version_process_again(version=DocumentVersion.objects.get(pk=result.version.pk))
    assert DocumentVersion.objects.filter(document=result.document).count() == 1


# --- the byte quota ------------------------------------------------------------------------------


def _rows() -> tuple[int, int, int, int]:
    return (
        Document.objects.count(),
        DocumentVersion.objects.count(),
        Job.objects.count(),
        FileObject.objects.count(),
    )


def test_an_upload_past_the_quota_is_refused_and_leaves_no_rows_or_files(media: Path) -> None:
    tenant = make_tenant(max_storage_bytes=len(TEXT) + 10)
    upload(tenant, TEXT, "first.txt")
    before, stored = _rows(), files_under(media)

    with pytest.raises(StorageQuotaExceeded) as refused:
        upload(tenant, TEXT + b"x", "second.txt")

    assert refused.value.code == STORAGE_QUOTA_EXCEEDED and refused.value.http_status == 413
    assert "of its" in refused.value.message and "limit" in refused.value.message
    assert _rows() == before and files_under(media) == stored


def test_the_setting_applies_when_the_tenant_has_no_own_limit_and_zero_means_none(settings: Any) -> None:
    settings.DOCUMENTS_TENANT_MAX_STORAGE_BYTES = len(TEXT)
    tenant = make_tenant()
    upload(tenant, TEXT, "first.txt")
    with pytest.raises(StorageQuotaExceeded):
        upload(tenant, b"one more byte", "second.txt")
    settings.DOCUMENTS_TENANT_MAX_STORAGE_BYTES = 0
    upload(tenant, b"one more byte", "second.txt")


def test_cancel_and_upload_again_does_not_get_around_the_quota_until_the_bytes_are_freed(
    clock: Clock,
) -> None:
    tenant = make_tenant(max_storage_bytes=len(TEXT) + 10)
    first = upload(tenant, TEXT, "first.txt")
    job_cancel(job_id=jid(first), actor_name="alice")

    with pytest.raises(StorageQuotaExceeded):
        upload(tenant, TEXT + b"!", "again.txt")

    clock.advance(7 * DAY + 1)
    reap()
    assert upload(tenant, TEXT + b"!", "again.txt").job is not None


def test_process_again_counts_its_copy_against_the_quota() -> None:
    tenant = make_tenant(max_storage_bytes=len(TEXT) + 10)
    first = upload(tenant, TEXT, "first.txt")
    job_cancel(job_id=jid(first), actor_name="alice")
    with pytest.raises(StorageQuotaExceeded):
        version_process_again(version=first.version)
    assert DocumentVersion.objects.count() == 1


def test_v1_files_and_batches_are_refused_past_the_quota(media: Path) -> None:
    tenant = make_tenant(max_storage_bytes=len(TEXT) + 10)
    file_create(tenant=tenant, user=None, data=TEXT, filename="a.txt", purpose="assistants")
    before, stored = _rows(), files_under(media)

    with pytest.raises(FileInputError) as refused:
        file_create(tenant=tenant, user=None, data=TEXT, filename="b.txt", purpose="assistants")
    assert (refused.value.code, refused.value.http_status) == (STORAGE_QUOTA_EXCEEDED, 413)

    batch = batch_create(tenant=tenant, files=[BatchFile(filename="c.txt", data=TEXT)])
    item = batch.items.get()
    assert item.error_code == STORAGE_QUOTA_EXCEEDED and item.document_id is None
    assert _rows()[:4] == before and files_under(media) == stored


def test_usage_counts_unfreed_versions_and_file_objects_per_tenant() -> None:
    acme, globex = make_tenant("acme"), make_tenant("globex")
    upload(acme, TEXT, "a.txt")
    upload(globex, b"other tenant\n", "b.txt")
    file_create(tenant=acme, user=None, data=b"12345", filename="c.txt", purpose="assistants")
    assert storage_used(acme) == len(TEXT) + 5
    assert storage_used(globex) == len(b"other tenant\n")


def test_retention_is_measured_from_the_end_of_the_job(clock: Clock) -> None:
    tenant = make_tenant()
    result = upload(tenant, TEXT, "notes.txt")
    clock.advance(6 * DAY)  # waited in the queue for days, then cancelled
    job_cancel(job_id=jid(result), actor_name="alice")
    clock.advance(2 * DAY)
    assert reap().swept == []
    finished = Job.objects.get(pk=jid(result)).finished_at
    assert finished is not None
    clock.at(finished + timedelta(days=7, seconds=1))
    assert reap().swept == [result.version.pk]


def test_a_job_whose_stored_file_is_gone_fails_as_input_gone_not_as_a_crash() -> None:
    """The backstop for a retry that passed its check just before the reaper freed the bytes:
    the stage finds no file and fails with a specific cause users are told to re-upload for."""
    tenant = make_tenant()
    result = upload(tenant, TEXT, "notes.txt")
    default_storage.delete(_name(result.version))

    job = run_until_idle(jid(result))

    assert (job.status, job.error_code, job.stage) == (Status.FAILED, "input_gone", "parsing")
    assert "Upload the file again" in job.error_message
