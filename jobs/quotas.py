"""Per-tenant limits: running jobs (enforced at claim) and waiting jobs (enforced at creation).

The engine treats tenants as opaque keys: the app that owns tenants registers a provider that
answers a tenant's limits. Without one, nothing is limited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection

from jobs.errors import QUOTA_EXCEEDED, JobError
from jobs.models import Job, Status

# Jobs that wait for a worker: what the queue quota counts.
WAITING = (Status.UPLOADED, Status.QUEUED)


@dataclass(frozen=True)
class Quota:
    max_running: int | None = None
    max_queued: int | None = None


QuotaProvider = Callable[[str], Quota]
_provider: QuotaProvider | None = None


class QueueFull(JobError):
    """The tenant already has its maximum of waiting jobs."""

    code = QUOTA_EXCEEDED.code

    def __init__(self, limit: int) -> None:
        super().__init__(f"the tenant already has {limit} jobs waiting")
        self.limit = limit


def register_provider(provider: QuotaProvider | None) -> None:
    global _provider
    _provider = provider


def quota_for(tenant: str) -> Quota:
    return _provider(tenant) if _provider is not None else Quota()


def check_queue(tenant: str, *, lock: bool = False) -> None:
    """Raise :class:`QueueFull` when ``tenant`` may not add another waiting job now.

    Inside a transaction, pass ``lock`` so that concurrent creators of one tenant count one
    after the other (:func:`lock_queue`). A tenant without a queue limit takes no lock and
    counts nothing: the creation of its job is not serialised behind its other uploads.
    """
    limit = quota_for(tenant).max_queued
    if limit is None:
        return
    if lock:
        lock_queue(tenant)
    if Job.objects.filter(tenant=tenant, status__in=WAITING).count() >= limit:
        raise QueueFull(limit)


def lock_queue(tenant: str) -> None:
    """Serialise the queue check of one tenant until the transaction ends.

    PostgreSQL: a transaction-level advisory lock on the tenant key (concurrent uploads of
    one tenant must not all pass the check). SQLite runs one writing transaction at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"jobs.queue:{tenant}"])
