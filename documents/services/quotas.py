"""Tenants' quotas as the job engine asks for them (it knows tenants only by their slug)."""

from __future__ import annotations

from documents.models import Tenant
from jobs.quotas import Quota


def tenant_quota(tenant_key: str) -> Quota:
    limits = Tenant.objects.filter(slug=tenant_key).values_list("max_running_jobs", "max_queued_jobs").first()
    if limits is None:
        return Quota()
    return Quota(max_running=limits[0], max_queued=limits[1])
