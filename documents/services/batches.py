"""Batch upload: many files in one request, one document each, followed and cancelled together.

Each file goes through the same upload service as a single upload (so the same checks); a file
that is refused is recorded with its reason and does not fail the others. When the last job of a
batch finishes, the batch is marked completed and ``batch.completed`` is sent (in that commit).

A batch belongs to its workspace; what it says about its files is what the reader may see: its
counts and its list hold the refused files (no document was made of them) and the documents the
reader may see (``documents.visibility``), and a cancel cancels only those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from documents.engines.validation import UploadRejected
from documents.models import Batch, BatchItem, Collection, Tenant
from documents.principals import Viewer
from documents.services.upload import document_upload
from documents.services.upload_quotas import early_answer
from documents.services.webhooks import BATCH_COMPLETED, event_emit
from documents.visibility import seen_among
from jobs.errors import JobConflict, TransitionRefused
from jobs.models import FINISHED, Actor, Job, Status
from jobs.services.lifecycle import job_cancel

# Combined states of a batch's documents, by their job's status.
COUNTED = {
    Status.UPLOADED: "queued",
    Status.QUEUED: "queued",
    Status.RUNNING: "in_progress",
    Status.CANCEL_REQUESTED: "in_progress",
    Status.STALLED: "in_progress",
    Status.READY: "ready",
    Status.FAILED: "failed",
    Status.CANCELLED: "cancelled",
}
COUNT_KEYS = ("queued", "in_progress", "ready", "failed", "cancelled", "total")


@dataclass(frozen=True)
class Upload:
    filename: str
    data: Any


def batch_create(
    *,
    tenant: Tenant,
    files: Iterable[Upload],
    user: Any = None,
    collection: Collection | None = None,
    access: list[str] | None = None,
) -> Batch:
    """Upload every file as a new document of one batch (into ``collection``, else the tenant's
    default one; with ``access``, checked principal keys, each document's own list); refusals are
    recorded per file."""
    owner = user if isinstance(user, get_user_model()) else None
    # The quotas looked at once for all the files, so that a full workspace refuses them before
    # storing any; each file's final answer is the one under the locks as it is created.
    early = early_answer(tenant)
    batch = Batch.objects.create(tenant=tenant, created_by=owner)
    for position, upload in enumerate(files):
        item = BatchItem(batch=batch, position=position, filename=upload.filename[:255])
        try:
            result = document_upload(
                tenant=tenant,
                data=upload.data,
                filename=upload.filename,
                user=user,
                collection=collection,
                access=access,
                early=early,
            )
        except UploadRejected as exc:
            item.error_code, item.error_message = str(exc.code), exc.message[:300]
        else:
            item.document_id, item.job = result.document.pk, result.job
            # The tenant's default collection, found (or made) by the first file, for the others.
            collection = collection or result.document.collection
        item.save()
    with transaction.atomic():
        # Each file's job was dispatched when its upload committed, and may have finished before
        # its item (or a later file) was recorded: the batch completes here if none is open.
        Batch.objects.filter(pk=batch.pk).update(sealed_at=timezone.now())
        batch_complete_if_done(batch_id=batch.pk)
    batch.refresh_from_db()
    return batch


NOTHING_TO_CANCEL = "Every file of this batch has finished processing: there is nothing to cancel."


def _items(batch: Batch, viewer: Viewer | None) -> list[BatchItem]:
    """The batch's items ``viewer`` may know of (None: all): every refused file, and each file
    whose document the viewer may see (still there or being deleted). A file whose document is
    gone (its access list gone with it) is known to the batch's uploader and to those who see
    every document."""
    items = list(batch.items.select_related("job"))
    if viewer is None or viewer.sees_all_already:
        return items
    seen = seen_among(viewer, [i.document_id for i in items if i.document_id is not None])
    uploader = viewer.user_id is not None and viewer.user_id == batch.created_by_id
    return [
        item
        for item in items
        if (item.job_id is None and item.document_id is None)  # refused: no document was made
        or item.document_id in seen
        or (item.document_id is None and (uploader or viewer.sees_all))
    ]


def batch_cancel(*, batch: Batch, user: Any = None, viewer: Viewer | None = None) -> Batch:
    """Cancel every unfinished job of the batch (of the documents ``viewer`` may see, when
    given): queued at once, running at its next safe point.

    Raises :class:`TransitionRefused` (and records nothing) when every such job has finished, as
    a finished job refuses its cancel.
    """
    name = getattr(user, "get_username", lambda: "")()
    job_ids = [item.job_id for item in _items(batch, viewer) if item.job_id is not None]
    jobs = Job.objects.filter(pk__in=job_ids)
    if not jobs.exclude(status__in=FINISHED).exists():
        raise TransitionRefused(NOTHING_TO_CANCEL)
    Batch.objects.filter(pk=batch.pk, cancel_requested_at=None).update(cancel_requested_at=timezone.now())
    for job_id in job_ids:
        try:
            job_cancel(job_id=job_id, actor=Actor.USER, actor_name=name, reason="batch cancelled")
        except JobConflict:
            continue  # finished, already cancelling, stalled, or moved on: nothing to cancel here
    batch.refresh_from_db()
    return batch


def file_counts(batch: Batch, viewer: Viewer | None = None) -> dict[str, int]:
    """The batch's files by state, of what ``viewer`` may know of (None: all)."""
    items = _items(batch, viewer)
    counts = Counter(COUNTED.get(Status(i.job.status), "in_progress") for i in items if i.job is not None)
    result = {key: counts.get(key, 0) for key in COUNT_KEYS}
    result["total"] = sum(counts.values())
    result["rejected"] = sum(1 for i in items if i.job_id is None)
    return result


def batch_job_finished(job: Job) -> None:
    """Part of the pipeline's ``on_finish`` hook: complete the job's batch if it was the last."""
    item = BatchItem.objects.filter(job_id=job.pk).only("batch_id").first()
    if item is None:
        return
    batch_complete_if_done(batch_id=item.batch_id)


def batch_complete_if_done(*, batch_id: Any) -> None:
    """Mark the batch completed and send ``batch.completed`` when it is sealed (every file of it
    recorded) and every job of it has finished (a batch made after its jobs started, as a source
    sync's, asks this once it is made). Call it inside a transaction."""
    # Locks the batch: two last jobs finishing at once (or the last job and the request that
    # seals the batch) are serialised, so exactly one sees the others finished and completes the
    # batch (the count below is read after the lock is held).
    batch = Batch.objects.select_for_update().get(pk=batch_id)
    if batch.completed_at is not None or batch.sealed_at is None:
        return
    open_jobs = Job.objects.filter(pk__in=batch.items.exclude(job=None).values("job_id")).exclude(
        status__in=FINISHED
    )
    if open_jobs.exists():
        return
    Batch.objects.filter(pk=batch.pk).update(completed_at=timezone.now())
    event_emit(
        tenant=batch.tenant,
        event_type=BATCH_COMPLETED,
        # Each endpoint's owner is told the counts of what they may see.
        data=lambda reader: {"batch_id": str(batch.pk), "file_counts": file_counts(batch, reader)},
    )


def batch_items(batch: Batch, viewer: Viewer | None = None) -> list[dict[str, Any]]:
    """The batch's files in order, of what ``viewer`` may know of (None: all)."""
    items = []
    for item in _items(batch, viewer):
        entry: dict[str, Any] = {"position": item.position, "filename": item.filename}
        if item.job is None:
            entry["error"] = {"code": item.error_code, "message": item.error_message}
        else:
            entry.update(
                document_id=str(item.document_id) if item.document_id else None,
                job_id=str(item.job_id),
                state=item.job.state_word() if item.document_id else "deleted",
            )
        items.append(entry)
    return items
