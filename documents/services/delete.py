"""Deleting a document, or one version that is not the published one.

The request's commit makes it invisible: the document (or version) becomes a tombstone that every
selector filters, ``published_version`` is cleared (search reads only published versions), a job
still working on it is cancelled through the job services, and a :class:`Deletion` row records who
deleted what (the audit record, kept) and that its cleanup is pending. After the commit the
cleanup removes the derived rows (through ``remove_outputs``, the one place that knows them), the
stored bytes and the rows themselves; if that process dies first, or a cancelled job's worker has
not stopped yet, the reaper's sweep (:func:`deletions_sweep`) finishes it.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_noop

from documents.models import Deletion, Document, DocumentVersion, Tenant
from documents.services.publish import OUTPUTS_BY_STAGE, remove_outputs
from documents.services.storage import file_in_use
from documents.services.webhooks import DOCUMENT_DELETED, event_emit
from jobs.errors import JobConflict
from jobs.models import FINISHED, Actor, Job, Status
from jobs.services.lifecycle import job_cancel, job_give_up

log = logging.getLogger(__name__)


class DeleteRefused(Exception):
    """A delete that is not possible as asked (409), with a user-safe reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class DeleteResult:
    deletion: Deletion
    # False once nothing remains to clean (the API answers 204 instead of 202).
    pending: bool


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def _result(deletion: Deletion) -> DeleteResult:
    deletion.refresh_from_db()
    return DeleteResult(deletion=deletion, pending=deletion.cleaned_at is None)


def _stop_job(job_id: Any, actor_name: str) -> None:
    """Stop a job of a deleted version through the job services: a queued one is cancelled at
    once, a running one is asked to stop at its next safe point, a stalled one is given up."""
    for _ in range(5):  # a worker may move the job between our read and our compare-and-set
        job = Job.objects.filter(pk=job_id).first()
        if job is None or job.status in FINISHED or job.status == Status.CANCEL_REQUESTED:
            return
        if job.status == Status.STALLED and job.cancel_requested_at is not None:
            return  # the reaper finishes that cancel
        try:
            if job.status == Status.STALLED:
                job_give_up(job_id=job.pk, actor=Actor.USER, actor_name=actor_name, reason="deleted")
            elif job.status in (Status.QUEUED, Status.RUNNING):
                job_cancel(job_id=job.pk, actor=Actor.USER, actor_name=actor_name, reason="deleted")
            else:
                return
            return
        except JobConflict:
            continue
    raise JobConflict(gettext_noop("The job kept changing; try again."), job_id=job_id)


def _record(
    *,
    tenant: Tenant,
    document_id: uuid.UUID,
    number: int | None,
    versions: list[DocumentVersion],
    user: Any,
    via: str,
) -> Deletion:
    owner = user if isinstance(user, get_user_model()) else None
    deletion = Deletion.objects.create(
        tenant=tenant,
        document_id=document_id,
        version_number=number,
        version_ids=[str(v.pk) for v in versions],
        requested_by=owner,
        requested_by_name=owner.get_username() if owner is not None else "",
        via=via,
    )
    transaction.on_commit(lambda: deletion_finish(deletion_id=deletion.pk))
    return deletion


def document_delete(
    *, tenant: Tenant, document_id: Any, user: Any = None, via: str = "api"
) -> DeleteResult | None:
    """Delete a document of ``tenant``: gone from search and every list when this returns.

    Idempotent: deleting it again answers the same record. ``None`` when the tenant has no such
    document (nor ever deleted one by that id): the caller says 404.
    """
    pk = _uuid(document_id)
    if pk is None:
        return None
    name = getattr(user, "get_username", lambda: "")()
    with transaction.atomic():
        # Jobs first, then the document: the publish hook takes the same order (job row, then
        # document), so a delete racing a publish waits instead of deadlocking.
        job_ids = DocumentVersion.objects.filter(document_id=pk, document__tenant=tenant).exclude(job=None)
        for job_id in job_ids.values_list("job_id", flat=True):
            _stop_job(job_id, name)
        # Serialises with uploads of a new version and with the publish hook.
        document = Document.objects.select_for_update().filter(tenant=tenant, pk=pk).first()
        if document is None or document.deleted_at is not None:
            earlier = Deletion.objects.filter(tenant=tenant, document_id=pk, version_number=None).first()
            return None if earlier is None else _result(earlier)
        versions = list(DocumentVersion.objects.filter(document=document))
        for version in versions:  # a version uploaded while we stopped the others
            if version.job_id is not None:
                _stop_job(version.job_id, name)
        Document.objects.filter(pk=pk).update(deleted_at=timezone.now(), published_version=None)
        deletion = _record(tenant=tenant, document_id=pk, number=None, versions=versions, user=user, via=via)
        event_emit(
            tenant=tenant,
            event_type=DOCUMENT_DELETED,
            data={"document_id": str(pk), "version": None},
            document_id=pk,
        )
    return _result(deletion)


def version_delete(
    *, tenant: Tenant, document_id: Any, number: int, user: Any = None, via: str = "api"
) -> DeleteResult | None:
    """Delete one version that is not the published one (:class:`DeleteRefused` otherwise).

    Idempotent like :func:`document_delete`; ``None`` when there is no such version.
    """
    pk = _uuid(document_id)
    if pk is None:
        return None
    name = getattr(user, "get_username", lambda: "")()
    with transaction.atomic():
        version = DocumentVersion.objects.filter(
            document_id=pk, document__tenant=tenant, document__deleted_at=None, number=number
        ).first()
        if version is not None and version.deleted_at is None and version.job_id is not None:
            if Document.objects.filter(pk=pk, published_version=version).exists():
                raise DeleteRefused(
                    "version_published",
                    gettext_noop(
                        "This is the published version. Upload a newer version first, or delete the document."
                    ),
                )
            _stop_job(version.job_id, name)
        document = Document.objects.select_for_update().filter(tenant=tenant, pk=pk, deleted_at=None).first()
        version = (
            DocumentVersion.objects.filter(document=document, number=number).first() if document else None
        )
        if version is None or version.deleted_at is not None:
            earlier = Deletion.objects.filter(tenant=tenant, document_id=pk, version_number=number).first()
            return None if earlier is None else _result(earlier)
        assert document is not None
        if document.published_version_id == version.pk:  # published while we looked
            raise DeleteRefused(
                "version_published",
                gettext_noop("This is the published version; it cannot be deleted alone."),
            )
        remaining = DocumentVersion.objects.filter(document=document, deleted_at=None).exclude(pk=version.pk)
        if not remaining.exists():
            raise DeleteRefused(
                "last_version",
                gettext_noop("This is the document's only version: delete the document instead."),
            )
        DocumentVersion.objects.filter(pk=version.pk).update(deleted_at=timezone.now())
        if document.latest_version_id == version.pk:
            Document.objects.filter(pk=pk).update(latest_version=remaining.order_by("-number").first())
        deletion = _record(
            tenant=tenant, document_id=pk, number=number, versions=[version], user=user, via=via
        )
    return _result(deletion)


def deletion_finish(*, deletion_id: Any) -> bool:
    """Remove what a delete left: derived rows, stored files, then the rows themselves, and mark
    the record cleaned. ``True`` once done; ``False`` while a job of it has not stopped yet (its
    worker could still write a batch) or when a step failed (the reaper's sweep tries again).

    Every step is idempotent, so a process killed anywhere in it is finished by the next call.
    """
    deletion = Deletion.objects.filter(pk=deletion_id, cleaned_at=None).first()
    if deletion is None:
        return False
    versions = list(DocumentVersion.objects.filter(pk__in=deletion.version_ids))
    if deletion.version_number is None:  # a version uploaded after the record was written
        versions += DocumentVersion.objects.filter(document_id=deletion.document_id).exclude(
            pk__in=[v.pk for v in versions]
        )
    job_ids = [v.job_id for v in versions if v.job_id is not None]
    if Job.objects.filter(pk__in=job_ids).exclude(status__in=FINISHED).exists():
        return False
    rows = files = 0
    try:
        for version in versions:
            before = _derived_count(version.pk)
            remove_outputs(version.pk, OUTPUTS_BY_STAGE[0][0])
            rows += before
            # Bytes before the row that names them: a crash in between leaves the row to retry.
            # A file another live version names stays (it goes with the last of them).
            name = version.file.name
            if name and file_in_use(name, besides=[v.pk for v in versions]):
                continue
            if name and default_storage.exists(name):
                default_storage.delete(name)
                files += 1
    except Exception:
        log.exception("cleanup of deletion %s failed; the reaper will try again", deletion.pk)
        return False
    with transaction.atomic():
        DocumentVersion.objects.filter(pk__in=[v.pk for v in versions]).delete()
        if deletion.version_number is None:
            Document.objects.filter(pk=deletion.document_id, deleted_at__isnull=False).delete()
        Deletion.objects.filter(pk=deletion.pk, cleaned_at=None).update(
            cleaned_at=timezone.now(), rows_removed=rows + len(versions), files_removed=files
        )
    return True


def _derived_count(version_id: uuid.UUID) -> int:
    return sum(
        m.objects.filter(version_id=version_id).count() for _, models in OUTPUTS_BY_STAGE for m in models
    )


def deletions_finish_for(version_ref: Any) -> None:
    """Finish the pending deletions that cover a version (its job has just stopped)."""
    version_id = _uuid(version_ref)
    if version_id is None:
        return
    found = DocumentVersion.objects.filter(pk=version_id).values("document_id", "number").first()
    if found is None:
        return
    covering = Q(version_number=None) | Q(version_number=found["number"])
    pending = Deletion.objects.filter(covering, document_id=found["document_id"], cleaned_at=None)
    for pk in pending.values_list("pk", flat=True):
        deletion_finish(deletion_id=pk)


def deletions_sweep(limit: int) -> list[Any]:
    """The reaper's sweep: finish pending deletions (oldest first); returns the finished ids."""
    pending = Deletion.objects.filter(cleaned_at=None).order_by("requested_at").values_list("pk", flat=True)
    return [pk for pk in list(pending[:limit]) if deletion_finish(deletion_id=pk)]
