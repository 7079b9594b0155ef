"""The quotas an upload answers to, in upload terms: the tenant's waiting jobs (429) and, with
its stored bytes (413, ``documents.services.storage``), a request's one early look at both.

The final answers are taken in the transaction that creates each version, under per-tenant
locks (``documents.services.upload``). A request of many files (a batch) may look once before
its first file, so that a full workspace refuses its files before storing any.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from documents.engines.validation import UploadRejected
from documents.models import Tenant
from documents.services.storage import StorageQuotaExceeded, storage_limit, storage_used
from documents.texts import Text
from jobs.quotas import QueueFull, check_queue

QUOTA_EXCEEDED = "quota_exceeded"


class QuotaExceeded(UploadRejected):
    """The tenant already has as many queued jobs as its quota allows."""

    def __init__(self, limit: int) -> None:
        Exception.__init__(self, "quota")
        self.limit = limit
        self.code = QUOTA_EXCEEDED  # type: ignore[assignment]
        self.message = Text(
            gettext_noop(
                "Your workspace already has %(limit)s documents waiting to be processed. "
                "Try again when some have finished."
            ),
            limit=limit,
        )
        self.http_status = 429
        self.detail = ""


def check_quota(tenant: Tenant) -> None:
    """The engine's queue quota, answered early (before the bytes are stored) in upload terms."""
    try:
        check_queue(tenant.slug)
    except QueueFull as full:
        raise QuotaExceeded(full.limit) from full


@dataclass(frozen=True)
class EarlyAnswer:
    """The tenant's quotas as a request of many files found them once, before its first file.

    Only an early answer, so that a full workspace refuses each file before its bytes are stored:
    each file's final answer is still the one under the locks in the transaction that creates
    its version (this look repeated per file would be the same statements again).
    """

    queue_limit: int | None  # the queue's limit when it was full, else None
    storage_used: int
    storage_limit: int | None

    def check(self, size: int) -> None:
        """Raise what the look found: :class:`QuotaExceeded` or :class:`StorageQuotaExceeded`."""
        if self.queue_limit is not None:
            raise QuotaExceeded(self.queue_limit)
        if self.storage_limit is not None and self.storage_used + size > self.storage_limit:
            raise StorageQuotaExceeded(used=self.storage_used, limit=self.storage_limit, adding=size)


def early_answer(tenant: Tenant) -> EarlyAnswer:
    """One look at the tenant's queue and stored bytes for the files of one request."""
    try:
        check_quota(tenant)
        full = None
    except QuotaExceeded as exc:
        full = exc.limit
    limit = storage_limit(tenant)
    return EarlyAnswer(
        queue_limit=full, storage_used=storage_used(tenant) if limit is not None else 0, storage_limit=limit
    )
