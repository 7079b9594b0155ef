"""Vector stores of the OpenAI-compatible API: a collection plus its expiry and chunking. Its
files are its documents, whichever API made them (a file attached through /v1 becomes a document
of the collection, made by the upload service and processed by its job, keeping the file object's
id). Status words come from the job; ``completed`` means the job is ready.
"""

# long-module: the /v1 store and attachment use cases share their locking and status mapping; each
# function is short and they read best together.

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from documents.embedders import embedders_as_loaded
from documents.models import (
    Collection,
    Document,
    DocumentVersion,
    FileObject,
    Tenant,
    VectorStoreFileBatch,
    VectorStoreSettings,
)
from documents.services.collections import collection_create, collection_delete, collection_update
from documents.services.delete import document_delete
from documents.services.files import file_read
from documents.services.upload import document_upload
from documents.stages.chunk import planned_sizes, sizes_used
from jobs.errors import JobConflict, UserAction, get_cause
from jobs.models import Actor, Job, Status
from jobs.services.lifecycle import job_cancel

MAX_EXPIRY_DAYS = 365
MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 100, 4096  # OpenAI's bounds for static chunking
AUTO = {"type": "auto"}

# Our job status -> the OpenAI vector store file status. Only ready is "completed".
FILE_STATUS = {
    Status.READY: "completed",
    Status.FAILED: "failed",
    Status.CANCELLED: "cancelled",
}


@dataclass
class StoreInputError(Exception):
    param: str
    code: str
    message: str
    http_status: int = 400


def store_ref(collection: Collection) -> str:
    return f"vs_{collection.pk.hex}"


def store_of(tenant: Tenant, ref: str) -> Collection | None:
    """The tenant's collection named by a ``vs_...`` id (None when unknown or another tenant's)."""
    if not isinstance(ref, str) or not ref.startswith("vs_"):
        return None
    try:
        pk = uuid.UUID(ref[3:])
    except ValueError:
        return None
    return Collection.objects.filter(tenant=tenant, pk=pk).select_related("vector_store").first()


def settings_of(collection: Collection) -> VectorStoreSettings:
    found = getattr(collection, "vector_store", None)
    if found is None:
        found, _ = VectorStoreSettings.objects.get_or_create(collection=collection)
    return found


def check_expires_after(value: Any) -> int | None:
    if value is None:
        return None
    ok = (
        isinstance(value, dict)
        and value.get("anchor") == "last_active_at"
        and set(value) <= {"anchor", "days"}
    )
    days = value.get("days") if isinstance(value, dict) else None
    if not ok or not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_EXPIRY_DAYS:
        raise StoreInputError(
            "expires_after",
            "invalid_expires_after",
            f'expires_after must be {{"anchor": "last_active_at", "days": 1-{MAX_EXPIRY_DAYS}}}.',
        )
    return days


def check_chunking(value: Any) -> dict[str, Any]:
    """``auto`` or ``static`` with max_chunk_size_tokens (100-4096) and chunk_overlap_tokens
    (at most half of it), as OpenAI bounds them."""
    if value is None or value == AUTO:
        return dict(AUTO)
    static = value.get("static") if isinstance(value, dict) and value.get("type") == "static" else None
    size = static.get("max_chunk_size_tokens") if isinstance(static, dict) else None
    overlap = static.get("chunk_overlap_tokens") if isinstance(static, dict) else None
    if (
        not isinstance(size, int)
        or not isinstance(overlap, int)
        or not MIN_CHUNK_TOKENS <= size <= MAX_CHUNK_TOKENS
        or not 0 <= overlap <= size // 2
    ):
        raise StoreInputError(
            "chunking_strategy",
            "invalid_chunking_strategy",
            "chunking_strategy is {'type': 'auto'} or {'type': 'static', 'static': "
            "{'max_chunk_size_tokens': 100-4096, 'chunk_overlap_tokens': at most half of it}}.",
        )
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}


def store_create(
    *, tenant: Tenant, name: Any, metadata: Any, expires_after: Any, chunking_strategy: Any
) -> Collection:
    """Create a vector store (a collection with its settings); nothing is stored when refused."""
    days = check_expires_after(expires_after)
    chunking = check_chunking(chunking_strategy)
    with transaction.atomic():
        collection = collection_create(tenant=tenant, name=name or "Vector store", metadata=metadata)
        now = timezone.now()
        collection.vector_store = VectorStoreSettings.objects.create(
            collection=collection,
            expires_after_days=days,
            expires_at=now + timedelta(days=days) if days else None,
            last_active_at=now,
            chunking_strategy=chunking,
        )
    return collection


_UNSET: Any = object()


def store_update(
    *, collection: Collection, name: Any = _UNSET, metadata: Any = _UNSET, expires_after: Any = _UNSET
) -> Collection:
    """Change name, metadata and/or expiry (given fields only)."""
    days = check_expires_after(expires_after) if expires_after is not _UNSET else _UNSET
    with transaction.atomic():
        collection_update(collection=collection, name=name, metadata=metadata)
        found = settings_of(collection)
        if days is not _UNSET:
            found.expires_after_days = days
            found.expires_at = found.last_active_at + timedelta(days=days) if days else None
            found.save(update_fields=["expires_after_days", "expires_at"])
    return collection


def store_touch(collection: Collection) -> None:
    """The store was used (a search, a file added): its expiry counts from now."""
    found = settings_of(collection)
    now = timezone.now()
    expires_at = now + timedelta(days=found.expires_after_days) if found.expires_after_days else None
    VectorStoreSettings.objects.filter(pk=found.pk).update(last_active_at=now, expires_at=expires_at)


def store_delete(*, collection: Collection, user: Any = None) -> int:
    """Delete the store: every document through the delete service, then the collection."""
    return collection_delete(collection=collection, user=user, via="v1")


def stores_expire_sweep(limit: int, now: datetime | None = None) -> list[Any]:
    """Reaper sweep: delete stores whose ``expires_at`` passed (their documents through the delete
    service). Returns the ids it deleted."""
    due = VectorStoreSettings.objects.filter(expires_at__lte=now or timezone.now()).order_by("expires_at")
    deleted = []
    for settings_row in due.select_related("collection")[:limit]:
        store_delete(collection=settings_row.collection, user=None)
        deleted.append(store_ref(settings_row.collection))
    return deleted


def usage_bytes(collection: Collection) -> int:
    total = DocumentVersion.objects.filter(
        document__collection=collection,
        document__deleted_at=None,
        document__published_version_id__isnull=False,
    ).aggregate(n=Sum("size"))["n"]
    return int(total or 0)


def file_attach(
    *,
    tenant: Tenant,
    collection: Collection,
    file_id: Any,
    attributes: Any = None,
    chunking_strategy: Any = None,
    user: Any = None,
    batch: VectorStoreFileBatch | None = None,
    access: list[str] | None = None,
    files: QuerySet[FileObject] | None = None,
) -> Document:
    """Attach a file object to the store: its bytes become a document of the collection (the
    upload service checks them, a job processes them) that keeps the file's id. Attaching it
    again returns the same document. Raises :class:`StoreInputError` (404) for an unknown file
    (or one not among ``files``, those the caller may see, when given), ``UploadRejected`` for
    bad bytes."""
    candidates = FileObject.objects.all() if files is None else files
    obj = candidates.filter(tenant=tenant, pk=str(file_id)).first()
    if obj is None:
        raise StoreInputError("file_id", "not_found", f"No file found with id '{str(file_id)[:80]}'.", 404)
    existing = live_files(collection).filter(file_id=obj.pk).first()
    if existing is not None:
        return existing
    chunking = check_chunking(chunking_strategy) if chunking_strategy is not None else None
    if chunking is None:
        chunking = settings_of(collection).chunking_strategy or dict(AUTO)
    result = None
    try:
        # One transaction: the document carries its file id and chunking before the job can run.
        with transaction.atomic():
            result = document_upload(
                tenant=tenant,
                data=file_read(obj),
                filename=obj.filename,
                title=obj.filename,
                user=user,
                attributes=attributes,
                collection=collection,
                chunking=chunking,
                access=access,
            )
            Document.objects.filter(pk=result.document.pk).update(
                file_id=obj.pk,
                chunking_strategy=chunking if chunking.get("type") == "static" else {},
                file_batch=batch,
            )
    except IntegrityError:  # the same file attached by a concurrent request: that one stays
        if result is not None and result.version.file.name:
            default_storage.delete(result.version.file.name)  # its rows were rolled back
        return live_files(collection).get(file_id=obj.pk)
    store_touch(collection)
    return live_files(collection).get(pk=result.document.pk)


def live_files(collection: Collection, visible: QuerySet[Document] | None = None) -> Any:
    """The store's files: every live document of the collection (of ``visible`` when given:
    ``selectors.visible_documents``, what the caller may see), with its latest job and tenant."""
    documents = Document.objects.all() if visible is None else visible
    live = documents.filter(collection=collection, deleted_at=None)
    return live.select_related("latest_version__job", "tenant")


def attached_file(
    tenant: Tenant, ref: str, file_id: str, visible: QuerySet[Document] | None = None
) -> Document | None:
    """A store's file (its document) with its version, job and tenant in one query (the SDK polls
    it)."""
    if not isinstance(ref, str) or not ref.startswith("vs_"):
        return None
    try:
        pk = uuid.UUID(ref[3:])
    except ValueError:
        return None
    documents = Document.objects.all() if visible is None else visible
    found = documents.filter(collection_id=pk, collection__tenant=tenant, deleted_at=None, file_id=file_id)
    result: Document | None = found.select_related("latest_version__job", "tenant").first()
    return result


def document_of_file(
    tenant: Tenant, file_id: str, visible: QuerySet[Document] | None = None
) -> Document | None:
    """The tenant's live document with this /v1 file id (of ``visible`` when given), with its
    latest version (a file made outside /v1 has no file object; its document answers for it)."""
    documents = Document.objects.all() if visible is None else visible
    found = documents.filter(tenant=tenant, deleted_at=None, file_id=file_id)
    result: Document | None = found.select_related("latest_version").order_by("created_at").first()
    return result


def chunking_used(document: Document) -> dict[str, Any]:
    """The chunking of the document's latest version as OpenAI's static strategy: the sizes its
    chunks were cut with, or (before the chunk stage ran) those it will cut them with: the static
    sizes a /v1 attachment asked for, or the settings', as the workspace's embedders bound them
    (their windows, and the sizes they rank best at). The document's tenant comes with it
    (``select_related``): the poll that reports this reads nothing more for it."""
    version = document.latest_version
    recorded = version.chunking if version is not None else None
    if not isinstance(recorded, dict):
        _target, maximum, overlap, _ = planned_sizes(
            document.chunking_strategy, embedders_as_loaded(document.tenant)
        )
        recorded = sizes_used(maximum, overlap)
    # Only OpenAI's two sizes: the version also records the tokenizer and window they count by.
    sizes = {
        key: recorded[key] for key in ("max_chunk_size_tokens", "chunk_overlap_tokens") if key in recorded
    }
    return {"type": "static", "static": sizes}


def file_detach(*, tenant: Tenant, attached: Document, user: Any = None) -> None:
    """Remove the file from the store: its document goes through the delete service."""
    document_delete(tenant=tenant, document_id=attached.pk, user=user, via="v1")


def job_of(attached: Document) -> Job | None:
    version = attached.latest_version
    return version.job if version is not None else None


def file_status(job: Job | None) -> str:
    return FILE_STATUS.get(Status(job.status), "in_progress") if job is not None else "in_progress"


def last_error(job: Job | None) -> dict[str, str] | None:
    """The failure in OpenAI's codes (server_error, unsupported_file, invalid_file,
    rate_limit_exceeded), mapped from our cause; the message is the cause's user message."""
    if job is None or job.status != Status.FAILED:
        return None
    try:
        cause = get_cause(job.error_code)
    except KeyError:
        return {"code": "server_error", "message": "Processing failed."}
    if cause.code == "unsupported_input":
        code = "unsupported_file"
    elif cause.code == "embedding_rate_limited":
        code = "rate_limit_exceeded"
    elif cause.action == UserAction.REUPLOAD:
        code = "invalid_file"
    else:
        code = "server_error"
    return {"code": code, "message": str(cause.user_message)}


def batch_cancel(
    *, batch: VectorStoreFileBatch, user: Any = None, visible: QuerySet[Document] | None = None
) -> None:
    """Cancel every unfinished job of the batch (of ``visible``, the documents the caller may
    see, when given): queued at once, running at its next safe point."""
    name = getattr(user, "get_username", lambda: "")()
    VectorStoreFileBatch.objects.filter(pk=batch.pk, cancel_requested_at=None).update(
        cancel_requested_at=timezone.now()
    )
    for attached in live_files(batch.collection, visible).filter(file_batch=batch):
        job = job_of(attached)
        if job is None:
            continue
        try:
            job_cancel(job_id=job.pk, actor=Actor.USER, actor_name=name, reason="file batch cancelled")
        except JobConflict:
            continue  # finished or already cancelling: nothing to cancel here


def file_counts(files: Any) -> dict[str, int]:
    """OpenAI's file_counts of a store's files (in_progress, completed, failed, cancelled, total)."""
    counts = dict.fromkeys(("in_progress", "completed", "failed", "cancelled"), 0)
    # Counted in the database: a store made from a large collection has many files.
    grouped = files.order_by().values_list("latest_version__job__status").annotate(n=Count("pk"))
    for status, n in grouped:
        counts[FILE_STATUS.get(status, "in_progress")] += n
    return {**counts, "total": sum(counts.values())}


def documents_of_store(collection: Collection) -> Any:
    return Document.objects.filter(collection=collection, deleted_at=None)
