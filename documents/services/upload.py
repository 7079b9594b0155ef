"""Uploading: one service for every entry point (API, pages, CLI).

Validate first (nothing is stored for a file that is refused), answer a byte-identical re-upload
of the published version without a new job, then store the file under a generated name and create
the version and its job in one short transaction. The quotas (stored bytes, waiting jobs) are
answered in that transaction, under their per-tenant locks; a refused file's bytes are removed.
A request of many files (a batch) may look at them once before its first file
(``upload_quotas.early_answer``), so that a full workspace refuses its files before storing any.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from documents.embedders import embedders_as_loaded
from documents.engines.validation import UploadRejected, ValidatedUpload, validate_upload
from documents.kinds import INGEST as KIND
from documents.models import Collection, Document, DocumentVersion, Tenant
from documents.parsers.word import DocxLimits
from documents.services.access import grants_for_new_document
from documents.services.attributes import check_attributes
from documents.services.collections import default_collection
from documents.services.dedup import processing_key, reusable_version
from documents.services.storage import check_storage, lock_storage
from documents.services.upload_quotas import EarlyAnswer, QuotaExceeded
from jobs.errors import TransitionRefused
from jobs.models import Actor, Job
from jobs.quotas import QueueFull
from jobs.services.lifecycle import job_create

NOT_LATEST = "A newer version of this document exists: only the latest version can be processed again."


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


def docx_limits() -> DocxLimits:
    """What a DOCX may expand to, from the settings (checked on its zip directory at upload)."""
    return DocxLimits(
        max_member_bytes=settings.DOCUMENTS_DOCX_MAX_MEMBER_BYTES,
        max_total_bytes=settings.DOCUMENTS_DOCX_MAX_TOTAL_BYTES,
        max_xml_member_bytes=settings.DOCUMENTS_DOCX_MAX_XML_BYTES,
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
    collection: Collection | None = None,
    chunking: dict[str, Any] | None = None,
    access: list[str] | None = None,
    recorded: Callable[[UploadResult], None] | None = None,
    early: EarlyAnswer | None = None,
) -> UploadResult:
    """Upload a new document, or (with ``document``) a new version of one.

    A new document goes into ``collection`` (the tenant's default collection when none is
    given); a new version stays in its document's collection.

    ``attributes`` (decoded JSON, optional) become the document's attributes; for a new version
    they replace the document's, like ``title``. ``access`` (principal keys checked by
    ``documents.services.access.check_principals``) is a new document's own access list; without
    it the document inherits its collection's.

    ``recorded`` is called with the result inside the transaction that creates the version (not
    for a re-upload of the published bytes, which creates nothing): a caller's own row about the
    upload commits with it or not at all, and may raise to refuse it. The result's document is
    the row as the upload wrote it (not read again): what ``recorded`` changes is not in it.

    ``early`` is the request's one look at the quotas (``upload_quotas.early_answer``: many
    files): a file it refuses is refused after its own checks, before its bytes are stored.

    Raises :class:`UploadRejected` (with its own code and HTTP status) when the file is refused,
    and ``DocumentInputError`` for bad attributes; nothing is stored then.
    """
    if document is not None and document.tenant_id != tenant.pk:
        raise ValueError("the document belongs to another tenant")
    if collection is not None and collection.tenant_id != tenant.pk:
        raise ValueError("the collection belongs to another tenant")
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
    if early is not None:
        early.check(checked.size)
    # The quotas are answered in the creating transaction, under their locks (a look here as well
    # would be the same statements twice per file); a refused file's bytes are removed below.
    stored = default_storage.save(_generated_name(tenant, checked), ContentFile(checked.content))
    try:
        return _create_version(
            tenant,
            checked,
            stored,
            title,
            checked_attributes,
            user,
            document,
            collection,
            chunking,
            access=access,
            recorded=recorded,
        )
    except BaseException:
        default_storage.delete(stored)  # nothing half-made stays behind
        raise


def _generated_name(tenant: Tenant, checked: ValidatedUpload) -> str:
    return f"uploads/{tenant.slug}/{uuid.uuid4().hex}.{checked.kind}"


def _create_version(
    tenant: Tenant,
    checked: ValidatedUpload,
    stored: str,
    title: str,
    attributes: dict[str, Any] | None,
    user: AbstractBaseUser | AnonymousUser | None,
    document: Document | None,
    collection: Collection | None,
    chunking: dict[str, Any] | None = None,
    *,
    again_from: DocumentVersion | None = None,
    actor: Actor = Actor.USER,
    access: list[str] | None = None,
    recorded: Callable[[UploadResult], None] | None = None,
) -> UploadResult:
    """The version row and its job in one transaction; with ``again_from`` (process again) only
    while that version is still the document's latest, so two clicks make one new version."""
    owner = user if isinstance(user, get_user_model()) else None
    with transaction.atomic():
        # The byte quota's final answer: parallel uploads of one tenant count one after the other
        # (the caller removes the stored bytes when this refuses).
        lock_storage(tenant)
        check_storage(tenant, checked.size)
        # The document's row is written once, after its version: these are its changes.
        changes: dict[str, Any] = {}
        if document is None:
            locked = None
            if collection is None:  # the default one, read under the lock its grants need: once
                collection = locked = default_collection(tenant, lock=True)
            document = Document.objects.create(
                tenant=tenant,
                collection=collection,
                title=(title or checked.safe_name)[:300],
                created_by=owner,
                attributes=attributes or {},
                access=access,
            )
            grants_for_new_document(document, locked=locked)
        else:
            # Lock the document: two concurrent uploads must not both become version N+1.
            document = Document.objects.select_for_update().get(pk=document.pk)
            if document.deleted_at is not None:
                raise DocumentDeleted()  # deleted while this upload was checked
            if again_from is not None and document.latest_version_id != again_from.pk:
                raise TransitionRefused(NOT_LATEST, job_id=again_from.job_id)
            if title:
                changes["title"] = title[:300]
            if attributes is not None:
                changes["attributes"] = attributes
        number = document.latest_number + 1
        # A /v1 static chunking and the workspace's embedders are part of what outputs depend on.
        # The embedders as the request's tenant row names them (no read per file): should a
        # re-index switch meanwhile, the key is the one every version before the switch has.
        key = processing_key(chunking, embedders_as_loaded(tenant))
        # Dedup (one rule for every entry point): the same bytes, published and verified in this
        # tenant with the same settings, are copied by the stages, not processed again.
        reused_from = reusable_version(tenant, checked.sha256, key)
        # The job first, so that the version row is written with it (its id is chosen here): the
        # job's task leaves at commit, when both exist.
        version_id = uuid.uuid4()
        try:
            job = job_create(
                kind=KIND,
                tenant=tenant.slug,
                subject_id=str(document.pk),
                subject_version=number,
                payload={"version_id": str(version_id), "document_id": str(document.pk)},
                actor=actor,
                actor_name=_username(user),
                reason=f"processing v{again_from.number} again" if again_from is not None else "uploaded",
            )
        except QueueFull as full:  # the engine's answer, under its lock: the queue quota is reached
            raise QuotaExceeded(full.limit) from full
        version = DocumentVersion.objects.create(
            id=version_id,
            processing=key,
            reused_from=reused_from,
            document=document,
            number=number,
            file=stored,
            original_name=checked.original_name.replace("\x00", "")[:255],
            kind=str(checked.kind),
            content_type=checked.content_type,
            encoding=checked.encoding or "",
            size=checked.size,
            sha256=checked.sha256,
            created_by=owner,
            job=job,
        )
        changes.update(latest_number=number, latest_version=version, last_activity_at=timezone.now())
        Document.objects.filter(pk=document.pk).update(**changes)
        # The row as written (it is locked or new: nothing else changed it), without reading it.
        for field, value in changes.items():
            setattr(document, field, value)
        if recorded is not None:
            recorded(UploadResult(document=document, version=version, job=job))
    return UploadResult(document=document, version=version, job=job)
