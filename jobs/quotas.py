"""Per-tenant limits on running jobs, enforced at claim.

The engine treats tenants as opaque keys: the app that owns tenants registers a provider that
answers a tenant's limits. Without one, nothing is limited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quota:
    max_running: int | None = None
    max_queued: int | None = None


QuotaProvider = Callable[[str], Quota]
_provider: QuotaProvider | None = None


def register_provider(provider: QuotaProvider | None) -> None:
    global _provider
    _provider = provider


def quota_for(tenant: str) -> Quota:
    return _provider(tenant) if _provider is not None else Quota()
