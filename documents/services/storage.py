"""Stored bytes: what a tenant holds, its byte quota, and freeing bytes nobody will read again.

**Usage** is every stored file of the tenant that has not been freed: the bytes of its versions
(cancelled and failed ones too, until the reaper frees them: cancelling and uploading again does
not get around the quota) and its ``/v1`` file objects. A file that several version rows name is
counted once.

**Quota**: an upload that would take the tenant past its limit is refused (``413
storage_quota_exceeded``) under a per-tenant lock in the transaction that creates its row, so
two parallel uploads cannot both pass; the refused upload's bytes are removed by the caller. A
batch also looks once, before the bytes of its first file are stored.

**Retention**: the bytes of a version whose job was cancelled or failed, or that a newer version
replaced, are kept ``DOCUMENTS_STORAGE_RETENTION_DAYS`` (for "process again" and retries), then
the reaper's sweep removes them. The row, its job and its history stay; ``bytes_freed_at`` says
when, and "process again" and retry refuse with :func:`freed_reason`. A published version is
never freed, and a file another unfreed version row names is never removed.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet, Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext_noop

from documents.engines.validation import UploadRejected
from documents.models import DocumentVersion, FileObject, Tenant
from documents.texts import Text
from jobs.models import Status
from jobs.rules import JobState

log = logging.getLogger(__name__)

STORAGE_QUOTA_EXCEEDED = "storage_quota_exceeded"
# A version's bytes wait for "process again" / retry only after these ends of its job.
ENDED = (Status.CANCELLED, Status.FAILED)


class StorageQuotaExceeded(UploadRejected):
    """The upload would take the tenant past its stored-bytes limit (413)."""

    def __init__(self, *, used: int, limit: int, adding: int) -> None:
        Exception.__init__(self, "storage quota")
        self.code = STORAGE_QUOTA_EXCEEDED  # type: ignore[assignment]
        self.used, self.limit, self.adding = used, limit, adding
        self.message = Text(
            gettext_noop(
                "Your workspace stores %(used)s of its %(limit)s limit; this file (%(size)s) does not fit. "
                "Delete documents you no longer need (cancelled and failed versions count until they are "
                "freed) or ask an administrator for a larger limit."
            ),
            used=filesizeformat(used),
            limit=filesizeformat(limit),
            size=filesizeformat(adding),
        )
        self.http_status = 413
        self.detail = ""


def storage_limit(tenant: Tenant) -> int | None:
    """The tenant's limit in bytes, ``None`` for no limit."""
    limit = tenant.max_storage_bytes
    if limit is None:
        limit = settings.DOCUMENTS_TENANT_MAX_STORAGE_BYTES
    return int(limit) or None


def storage_used(tenant: Tenant) -> int:
    """Bytes the tenant holds now (each stored file once)."""
    versions = (
        DocumentVersion.objects.filter(document__tenant=tenant, bytes_freed_at=None)
        .exclude(file="")
        .values("file", "size")
        .distinct()  # a file named by several rows is stored once
        .aggregate(total=Sum("size"))["total"]
    )
    files = FileObject.objects.filter(tenant=tenant).aggregate(total=Sum("bytes"))["total"]
    return int(versions or 0) + int(files or 0)


def storage_usage(tenant: Tenant) -> dict[str, int | None]:
    """What the API and the documents page show: bytes used and the limit (null: none)."""
    return {"used_bytes": storage_used(tenant), "limit_bytes": storage_limit(tenant)}


def lock_storage(tenant: Tenant) -> None:
    """Serialise the byte-quota check of one tenant until the transaction ends.

    PostgreSQL: a transaction-level advisory lock (two parallel uploads must not both count the
    room that only one of them fits in). SQLite's IMMEDIATE transactions already run one writer
    at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"documents.storage:{tenant.pk}"])


def check_storage(tenant: Tenant, adding: int) -> None:
    """Raise :class:`StorageQuotaExceeded` when ``adding`` more bytes would pass the limit.

    Final inside the creating transaction after :func:`lock_storage`; a batch's one look before
    its files is an early answer (``documents.services.upload_quotas``).
    """
    limit = storage_limit(tenant)
    if limit is None:
        return
    used = storage_used(tenant)
    if used + adding > limit:
        raise StorageQuotaExceeded(used=used, limit=limit, adding=adding)


# --- retention --------------------------------------------------------------------------------


def retention() -> timedelta:
    return timedelta(days=settings.DOCUMENTS_STORAGE_RETENTION_DAYS)


def _ended_before(cut: datetime) -> Q:
    ended = Q(job__status__in=ENDED, job__finished_at__lte=cut)
    return ended | Q(superseded_at__lte=cut)


def freeable(now: datetime) -> QuerySet[DocumentVersion]:
    """Versions whose bytes the retention lets go at ``now``: cancelled, failed or superseded
    long enough ago, never the published one, never one being deleted (its delete frees it)."""
    return (
        DocumentVersion.objects.filter(
            _ended_before(now - retention()),
            bytes_freed_at=None,
            deleted_at=None,
            document__deleted_at=None,
        )
        .exclude(file="")
        .exclude(document__published_version_id=F("id"))
    )


def file_in_use(name: str, *, besides: Any) -> bool:
    """Whether an unfreed version other than ``besides`` (a pk or a list of them) names ``name``."""
    others = besides if isinstance(besides, list) else [besides]
    return DocumentVersion.objects.filter(file=name, bytes_freed_at=None).exclude(pk__in=others).exists()


def version_bytes_free(*, version_id: Any, now: datetime | None = None) -> bool:
    """Remove one version's stored bytes if the retention allows it now; ``True`` when freed.

    Idempotent: the file goes first, then the mark, in one transaction holding the version's
    row, so a process killed in between leaves the row unfreed and the next pass finishes it.
    """
    now = now or timezone.now()
    with transaction.atomic():
        # The row lock: a delete or a second reaper freeing the same version waits, then sees it freed.
        version = freeable(now).select_for_update(of=("self",)).filter(pk=version_id).first()
        if version is None:
            return False
        name = version.file.name
        if name and not file_in_use(name, besides=version.pk):
            default_storage.delete(name)
        DocumentVersion.objects.filter(pk=version.pk, bytes_freed_at=None).update(bytes_freed_at=now)
    log.info("freed the stored bytes of version %s (%s bytes)", version.pk, version.size)
    return True


def stored_bytes_sweep(limit: int) -> list[Any]:
    """The reaper's sweep: free the bytes whose retention has passed (oldest first)."""
    now = timezone.now()
    ids = list(freeable(now).order_by("created_at").values_list("pk", flat=True)[:limit])
    freed = []
    for pk in ids:
        try:
            if version_bytes_free(version_id=pk, now=now):
                freed.append(pk)
        except Exception:
            log.exception("freeing the bytes of version %s failed; the next pass tries again", pk)
    return freed


# --- what users are told ------------------------------------------------------------------------


def freed_reason(version: DocumentVersion) -> str | None:
    """Why a version whose bytes were freed cannot be processed again or retried (user-safe)."""
    if version.bytes_freed_at is None:
        return None
    days = settings.DOCUMENTS_STORAGE_RETENTION_DAYS
    kept = f"{days:g} days" if days else "no time"
    return (
        f"The stored file of this version was removed on {version.bytes_freed_at:%Y-%m-%d} "
        f"(files of stopped or replaced versions are kept {kept}). Upload the file again to process it."
    )


def bytes_kept_until(version: DocumentVersion, job: JobState | None) -> datetime | None:
    """When the reaper may free this version's bytes, if it is on its way to being freed."""
    if version.bytes_freed_at is not None or version.deleted_at is not None:
        return None
    if version.superseded_at is not None:
        return version.superseded_at + retention()
    if job is not None and job.status in ENDED and job.finished_at is not None:
        return job.finished_at + retention()
    return None
