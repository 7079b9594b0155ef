"""The upload service: versions and their jobs, what is stored and how, duplicates, rejections
that store nothing, and the per-tenant queue quota."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.db import connection

from documents.engines.validation import UploadRejected
from documents.kinds import INGEST as KIND
from documents.models import Document, DocumentVersion
from documents.services import upload as upload_service
from jobs.models import Job, Status
from jobs.services.lifecycle import job_cancel
from tests.documents import files
from tests.documents.helpers import files_under, make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def tenant():
    return make_tenant("acme")


def stored_name(version: DocumentVersion) -> str:
    return str(version.file.name)


def stored_path(version: DocumentVersion) -> Path:
    return Path(default_storage.path(stored_name(version)))


def test_a_new_document_gets_version_1_with_a_queued_ingest_job(tenant):
    result = upload(tenant, files.text_pdf(), "report.pdf")
    version = DocumentVersion.objects.get(document=result.document)
    job = Job.objects.get()
    assert (result.duplicate, result.version.pk, version.number) == (False, version.pk, 1)
    assert version.job_id == job.pk == result.job.pk
    assert (job.kind, job.status, job.stage) == (KIND, Status.QUEUED, "parsing")
    assert (job.tenant, job.subject_id, job.subject_version) == ("acme", str(result.document.pk), 1)
    assert job.payload == {"version_id": str(version.pk), "document_id": str(result.document.pk)}
    assert Document.objects.get().latest_number == 1


def test_a_second_upload_of_the_document_is_version_2_with_its_own_job(tenant):
    first = upload(tenant, files.text_pdf(), "report.pdf")
    second = upload(
        tenant, files.text_pdf(["A revised first page."]), "report-v2.pdf", document=first.document
    )
    assert second.document.pk == first.document.pk
    assert (first.version.number, second.version.number) == (1, 2)
    assert second.job is not None and first.job is not None and second.job.pk != first.job.pk
    job = Job.objects.get(pk=second.job.pk)
    assert (job.subject_id, job.subject_version, job.status) == (str(first.document.pk), 2, Status.QUEUED)
    assert job.payload["version_id"] == str(second.version.pk)
    assert Document.objects.get().latest_number == 2
    assert Job.objects.count() == 2


def test_the_file_is_stored_under_a_generated_name_with_its_recorded_facts(tenant, media):
    data = files.text_pdf()
    result = upload(tenant, data, "Quarterly Report.pdf")
    version = DocumentVersion.objects.get(pk=result.version.pk)
    name = version.file.name
    assert name.startswith("uploads/acme/") and name.endswith(".pdf")
    assert "Quarterly" not in name and "Report" not in name
    assert stored_path(version).read_bytes() == data
    assert stored_path(version).resolve().is_relative_to(media.resolve())
    assert version.original_name == "Quarterly Report.pdf"
    assert (version.kind, version.content_type) == ("pdf", "application/pdf")
    assert version.size == len(data)
    assert version.sha256 == hashlib.sha256(data).hexdigest()


def test_two_uploads_with_the_same_client_name_never_share_a_stored_file(tenant):
    one = upload(tenant, files.text_pdf(["First file."]), "same.pdf")
    two = upload(tenant, files.text_pdf(["Second file."]), "same.pdf")
    assert one.version.file.name != two.version.file.name
    assert stored_path(one.version).read_bytes() != stored_path(two.version).read_bytes()


def test_a_wrong_extension_is_decided_by_the_content(tenant):
    pdf_named_txt = upload(tenant, files.text_pdf(), "notes.txt").version
    png_named_pdf = upload(tenant, files.png(), "scan.pdf").version
    text_named_docx = upload(tenant, b"Plain words, nothing more.", "letter.docx").version
    assert (pdf_named_txt.kind, pdf_named_txt.content_type) == ("pdf", "application/pdf")
    assert pdf_named_txt.file.name.endswith(".pdf")
    assert (png_named_pdf.kind, png_named_pdf.content_type) == ("png", "image/png")
    assert png_named_pdf.file.name.endswith(".png")
    assert (text_named_docx.kind, text_named_docx.content_type) == ("text", "text/plain")


def test_a_name_with_path_parts_and_html_is_stored_safely(tenant, media, tmp_path: Path):
    hostile = "../../outside/<img src=x onerror=alert(1)>.pdf"
    result = upload(tenant, files.text_pdf(), hostile)
    version = DocumentVersion.objects.get(pk=result.version.pk)
    # The bytes live under a generated name inside the tenant's upload folder, nowhere else.
    stored = stored_path(version).resolve()
    assert stored.parent == (media / "uploads" / "acme").resolve()
    assert "img" not in stored_name(version) and ".." not in stored_name(version)
    assert files_under(tmp_path) == [stored]
    # What is displayed is the sanitised name: no directories, no markup characters.
    assert Document.objects.get().title == "_img src=x onerror=alert(1)_.pdf"


@pytest.mark.django_db(transaction=True)
def test_a_reupload_identical_to_the_published_version_is_a_duplicate_without_a_job(tenant, media):
    data = files.text_pdf()
    first = upload(tenant, data, "report.pdf")
    assert run_until_idle(first.job.pk).status == Status.READY
    document = Document.objects.get(pk=first.document.pk)

    again = upload(tenant, data, "report-copy.pdf", document=document)

    assert again.duplicate is True
    assert again.version.pk == first.version.pk and again.job is not None and again.job.pk == first.job.pk
    assert Job.objects.count() == 1
    assert DocumentVersion.objects.count() == 1
    assert Document.objects.get().latest_number == 1
    assert len(files_under(media)) == 1


def test_a_reupload_identical_to_an_unpublished_version_is_a_new_version(tenant):
    data = files.text_pdf()
    first = upload(tenant, data, "report.pdf")
    again = upload(tenant, data, "report.pdf", document=Document.objects.get(pk=first.document.pk))
    assert again.duplicate is False
    assert again.version.number == 2
    assert Job.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_duplicate_detection_uses_the_published_version_in_the_database(tenant):
    data = files.text_pdf()
    first = upload(tenant, data, "report.pdf")
    run_until_idle(first.job.pk)
    # first.document was loaded before the publish: its published_version is stale.
    again = upload(tenant, data, "report.pdf", document=first.document)
    assert again.duplicate is True
    assert Job.objects.count() == 1


REJECTIONS = [
    pytest.param(lambda: b"", None, "file_empty", 400, id="empty"),
    pytest.param(files.text_pdf, 1024, "file_too_large", 413, id="too-large"),
    pytest.param(files.zip_of_other_files, None, "unsupported_type", 415, id="unsupported-zip"),
    pytest.param(lambda: bytes(range(256)) * 8, None, "unsupported_type", 415, id="unsupported-binary"),
    pytest.param(files.docx_bomb, None, "docx_bomb", 400, id="docx-bomb"),
]


@pytest.mark.parametrize(("make", "limit", "code", "status"), REJECTIONS)
def test_a_rejected_upload_raises_its_code_and_stores_nothing(
    tenant, media, settings, make, limit, code, status
):
    if limit is not None:
        settings.DOCUMENTS_MAX_UPLOAD_BYTES = limit
    with pytest.raises(UploadRejected) as caught:
        upload(tenant, make(), "upload.docx")
    assert (caught.value.code, caught.value.http_status) == (code, status)
    assert caught.value.message and "/" not in caught.value.message
    assert files_under(media) == []
    assert (Document.objects.count(), DocumentVersion.objects.count(), Job.objects.count()) == (0, 0, 0)


@pytest.mark.parametrize("name", ["../", " . ", "\u202e\u200b"])
def test_a_name_with_nothing_usable_left_is_rejected_and_nothing_stored(tenant, media, name):
    with pytest.raises(UploadRejected) as caught:
        upload(tenant, files.text_pdf(), name)
    assert (caught.value.code, caught.value.http_status) == ("invalid_name", 400)
    assert files_under(media) == []
    assert (Document.objects.count(), Job.objects.count()) == (0, 0)


def test_a_rejected_new_version_leaves_the_document_and_its_versions_unchanged(tenant, media):
    first = upload(tenant, files.text_pdf(), "report.pdf")
    with pytest.raises(UploadRejected) as caught:
        upload(tenant, files.docx_bomb(), "report.docx", document=first.document)
    assert caught.value.code == "docx_bomb"
    assert DocumentVersion.objects.count() == 1
    assert Job.objects.count() == 1
    assert Document.objects.get().latest_number == 1
    assert len(files_under(media)) == 1


def test_a_tenant_over_its_queue_quota_is_refused_with_429_and_nothing_stored(media):
    tenant = make_tenant("small", max_queued_jobs=1)
    first = upload(tenant, files.text_pdf(), "one.pdf")
    assert Job.objects.get().status == Status.QUEUED

    with pytest.raises(UploadRejected) as caught:
        upload(tenant, files.text_pdf(["Another document."]), "two.pdf")

    assert (caught.value.code, caught.value.http_status) == ("quota_exceeded", 429)
    assert (Document.objects.count(), DocumentVersion.objects.count(), Job.objects.count()) == (1, 1, 1)
    assert files_under(media) == [stored_path(first.version).resolve()]


def test_the_quota_frees_up_when_the_queued_job_is_cancelled(media):
    tenant = make_tenant("small", max_queued_jobs=1)
    first = upload(tenant, files.text_pdf(), "one.pdf")
    job_cancel(job_id=first.job.pk)
    second = upload(tenant, files.text_pdf(["Another document."]), "two.pdf")
    assert second.job is not None and second.job.status == Status.QUEUED


def test_the_quota_of_one_tenant_does_not_limit_another(media):
    small = make_tenant("small", max_queued_jobs=1)
    other = make_tenant("other", max_queued_jobs=1)
    upload(small, files.text_pdf(), "one.pdf")
    result = upload(other, files.text_pdf(), "one.pdf")
    assert result.job is not None and result.job.tenant == "other"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_uploads_cannot_both_pass_a_quota_of_one(
    media: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = make_tenant("small", max_queued_jobs=1)
    # Force the interleaving: each upload, its bytes stored, waits for the other's before its
    # creating transaction (where the queue is counted under the engine's lock).
    both_stored = threading.Barrier(2, timeout=3)
    real_create = upload_service._create_version

    def wait_then_create(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            both_stored.wait()
        return real_create(*args, **kwargs)

    monkeypatch.setattr(upload_service, "_create_version", wait_then_create)
    outcomes: list[str] = []

    def attempt(number: int) -> None:
        try:
            upload(tenant, files.text_pdf([f"Document number {number}."]), f"{number}.pdf")
            outcomes.append("accepted")
        except UploadRejected as exc:
            outcomes.append(str(exc.code))
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(outcomes) == ["accepted", "quota_exceeded"]
    assert Job.objects.filter(tenant="small", status=Status.QUEUED).count() == 1
