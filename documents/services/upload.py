"""Uploading: one service for every entry point (API, pages, CLI).

Validate first (nothing is stored for a rejected upload), answer a byte-identical re-upload of
the published version without a new job, then store the file under a generated name and create
the version and its job in one short transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from documents.engines.validation import DocxLimits, UploadRejected, ValidatedUpload, validate_upload
from documents.models import Document, DocumentVersion, Tenant
from documents.pipeline import KIND
from documents.services.attributes import check_attributes
from jobs.models import Actor, Job
from jobs.quotas import QueueFull, check_queue
from jobs.services.lifecycle import job_create

QUOTA_EXCEEDED = "quota_exceeded"


class QuotaExceeded(UploadRejected):
    """The tenant already has as many queued jobs as its quota allows."""

    def __init__(self, limit: int) -> None:
        Exception.__init__(self, "quota")
        self.code = QUOTA_EXCEEDED  # type: ignore[assignment]
        self.message = (
            f"Your workspace already has {limit} documents waiting to be processed. "
            "Try again when some have finished."
        )
        self.http_status = 429
        self.detail = ""


class DocumentDeleted(UploadRejected):
    """The document was deleted while a new version of it was being uploaded."""

    def __init__(self) -> None:
        Exception.__init__(self, "deleted")
        self.code = "not_found"  # type: ignore[assignment]
        self.message = "Not found."
        self.http_status = 404
        self.detail = ""


@dataclass(frozen=True)
class UploadResult:
    document: Document
    version: DocumentVersion
    job: Job | None
    duplicate: bool = False


def _username(user: AbstractBaseUser | AnonymousUser | None) -> str:
    return str(user.get_username()) if user is not None and user.is_authenticated else ""


def check_quota(tenant: Tenant) -> None:
    """The engine's queue quota, answered early (before the bytes are stored) in upload terms."""
    try:
        check_queue(tenant.slug)
    except QueueFull as full:
        raise QuotaExceeded(full.limit) from full


def docx_limits() -> DocxLimits:
    """What a DOCX may expand to, from the settings (checked on its zip directory at upload)."""
    return DocxLimits(
        max_member_bytes=int(settings.DOCUMENTS_DOCX_MAX_MEMBER_BYTES),
        max_total_bytes=int(settings.DOCUMENTS_DOCX_MAX_TOTAL_BYTES),
        max_xml_member_bytes=int(settings.DOCUMENTS_DOCX_MAX_XML_BYTES),
    )


def document_upload(
    *,
    tenant: Tenant,
    data: Any,
    filename: str,
    title: str = "",
    user: AbstractBaseUser | AnonymousUser | None = None,
    document: Document | None = None,
    attributes: Any = None,
) -> UploadResult:
    """Upload a new document, or (with ``document``) a new version of one.

    ``attributes`` (decoded JSON, optional) become the document's attributes; for a new version
    they replace the document's, like ``title``.

    Raises :class:`UploadRejected` (with its own code and HTTP status) when the file is refused,
    and ``DocumentInputError`` for bad attributes; nothing is stored then.
    """
    if document is not None and document.tenant_id != tenant.pk:
        raise ValueError("the document belongs to another tenant")
    checked_attributes = check_attributes(attributes) if attributes is not None else None
    checked = validate_upload(
        data, filename=filename, max_bytes=settings.DOCUMENTS_MAX_UPLOAD_BYTES, docx_limits=docx_limits()
    )
    if document is not None:
        # The caller's copy may predate a publish: the database says what is published now.
        document.refresh_from_db(fields=["published_version"])
        published = document.published_version
        if published is not None and published.sha256 == checked.sha256:
            return UploadResult(document=document, version=published, job=published.job, duplicate=True)
    check_quota(tenant)  # cheap early answer; the engine checks again under a lock (job_create)
    stored = default_storage.save(_generated_name(tenant, checked), ContentFile(checked.content))
    try:
        return _create_version(tenant, checked, stored, title, checked_attributes, user, document)
    except BaseException:
        default_storage.delete(stored)  # nothing half-made stays behind
        raise


def _generated_name(tenant: Tenant, checked: ValidatedUpload) -> str:
    return f"uploads/{tenant.slug}/{uuid.uuid4().hex}.{checked.kind.value}"


def _create_version(
    tenant: Tenant,
    checked: ValidatedUpload,
    stored: str,
    title: str,
    attributes: dict[str, Any] | None,
    user: AbstractBaseUser | AnonymousUser | None,
    document: Document | None,
) -> UploadResult:
    owner = user if isinstance(user, get_user_model()) else None
    with transaction.atomic():
        if document is None:
            document = Document.objects.create(
                tenant=tenant,
                title=(title or checked.safe_name)[:300],
                created_by=owner,
                attributes=attributes or {},
            )
        else:
            # Lock the document: two concurrent uploads must not both become version N+1.
            document = Document.objects.select_for_update().get(pk=document.pk)
            if document.deleted_at is not None:
                raise DocumentDeleted()  # deleted while this upload was checked
            if title:
                Document.objects.filter(pk=document.pk).update(title=title[:300])
            if attributes is not None:
                Document.objects.filter(pk=document.pk).update(attributes=attributes)
        number = document.latest_number + 1
        Document.objects.filter(pk=document.pk).update(latest_number=number)
        version = DocumentVersion.objects.create(
            document=document,
            number=number,
            file=stored,
            original_name=checked.original_name.replace("\x00", "")[:255],
            kind=checked.kind.value,
            content_type=checked.content_type,
            encoding=checked.encoding or "",
            size=checked.size,
            sha256=checked.sha256,
            created_by=owner,
        )
        try:
            job = job_create(
                kind=KIND,
                tenant=tenant.slug,
                subject_id=str(document.pk),
                subject_version=number,
                payload={"version_id": str(version.pk), "document_id": str(document.pk)},
                actor=Actor.USER,
                actor_name=_username(user),
            )
        except QueueFull as full:  # another upload took the last place since the early check
            raise QuotaExceeded(full.limit) from full
        DocumentVersion.objects.filter(pk=version.pk).update(job=job)
        Document.objects.filter(pk=document.pk).update(latest_version=version)
        version.job = job
    document.refresh_from_db()
    return UploadResult(document=document, version=version, job=job)
