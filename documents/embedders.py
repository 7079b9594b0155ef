"""The configured embedder, built once per process, with the cross-process limiter for HTTP."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from documents.engines.embedding import Embedder, get_embedder
from documents.limiter import DatabaseLimiter


@cache
def configured_embedder() -> Embedder:
    backend = settings.EMBEDDINGS_BACKEND
    if backend == "http":
        limiter = DatabaseLimiter(max_concurrency=int(settings.EMBEDDINGS_HTTP_MAX_CONCURRENCY))
        return get_embedder(backend, limiter=limiter)
    return get_embedder(backend)
