"""The configured embedder, built once per process, with the cross-process limiter for HTTP;
embedders by name, and a tenant's active (and re-index target) embedder."""

from __future__ import annotations

import re
from functools import cache

from django.conf import settings

from documents.engines.embedding import Embedder, HashingEmbedder, get_embedder
from documents.limiter import DatabaseLimiter
from documents.models import Tenant


@cache
def configured_embedder() -> Embedder:
    backend = settings.EMBEDDINGS_BACKEND
    if backend == "http":
        limiter = DatabaseLimiter(max_concurrency=settings.EMBEDDINGS_HTTP_MAX_CONCURRENCY)
        return get_embedder(backend, limiter=limiter)
    return get_embedder(backend)


class UnknownEmbedder(ValueError):
    """An embedder name or backend this deployment cannot build (a user-safe message)."""

    code = "unknown_embedder"


_HASHING_NAME = re.compile(r"hashing-v(\d+)-(\d+)")


def embedder_for(spec: str) -> Embedder:
    """The embedder named ``spec``: the vector-space name an embedder reports (e.g.
    ``hashing-v1-512``), a backend (``local``, ``hashing``, ``http``) or ``hashing:<dimension>``.

    Stored names must map back to an embedder (a tenant's active one outlives a settings
    change); the configured one is reused, so its limiter and loaded model are shared.
    """
    spec = spec.strip()
    configured = configured_embedder()
    if spec in ("", configured.name, settings.EMBEDDINGS_BACKEND):
        return configured
    return _named(spec)


@cache
def _named(spec: str) -> Embedder:
    backend, _, dimension = spec.partition(":")
    if backend == "hashing":
        return HashingEmbedder(int(dimension)) if dimension.isdigit() else get_embedder("hashing")
    hashing = _HASHING_NAME.fullmatch(spec)
    if hashing and int(hashing.group(1)) == HashingEmbedder.VERSION:
        return HashingEmbedder(int(hashing.group(2)))
    if spec == "local" or spec.startswith("local-"):
        local = get_embedder("local")
        if spec == "local" or local.name == spec:
            return local
    raise UnknownEmbedder(f"No embedder named {spec[:100]!r} is available here.")


def tenant_embedder_name(tenant: Tenant) -> str:
    """The tenant's active embedder's name; a tenant without one takes the configured embedder
    (recorded at once, so a later settings change leaves it searching as before)."""
    if not tenant.active_embedder:
        name = configured_embedder().name
        Tenant.objects.filter(pk=tenant.pk, active_embedder="").update(active_embedder=name)
        tenant.active_embedder = Tenant.objects.values_list("active_embedder", flat=True).get(pk=tenant.pk)
    return tenant.active_embedder


def tenant_embedders(tenant: Tenant) -> list[Embedder]:
    """What a new version is embedded with: the active embedder and, during a re-index, the
    target (read fresh: a re-index may have started since ``tenant`` was loaded)."""
    active = embedder_for(tenant_embedder_name(tenant))
    target = Tenant.objects.values_list("target_embedder", flat=True).get(pk=tenant.pk)
    if target and target != active.name:
        return [active, embedder_for(target)]
    return [active]
