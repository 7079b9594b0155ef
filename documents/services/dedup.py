"""Dedup: bytes already ingested in the same tenant are not processed again.

One rule for every entry point (API, pages, CLI, batches: they all upload through
``documents.services.upload``): a new version whose bytes (sha256) equal those of a version of
the same tenant that is **published now** (so verified: parsed, OCR'd, chunked, embedded,
indexed and found by the probe) and that was made with the **same processing settings** (chunk
sizes, embedder) records that version as ``reused_from``. Its job still walks every stage, but
each stage copies the earlier version's verified outputs instead of computing them: no parser,
no OCR engine, no embedder runs. Failed, cancelled, superseded, unpublished and deleted versions
are never a source. Should the source disappear before a stage copies (it was deleted or
replaced meanwhile), that stage computes its output the ordinary way from what came before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import F

from documents.embedders import configured_embedder
from documents.embedders.base import Embedder
from documents.engines.chunking import CHUNKING_SCHEME
from documents.models import Chunk, DocumentVersion, Page, Tenant
from documents.retrieval.index import search_index
from jobs.models import Status


def processing_key(chunking: dict[str, Any] | None = None, embedders: Sequence[Embedder] = ()) -> str:
    """What the outputs depend on besides the bytes: the chunker's sizes and the workspace's
    embedders (what the chunk stage cuts for and the embedding stage embeds with: the upload
    passes ``embedders_as_loaded``; the configured one when none are given), and a /v1 static
    chunking strategy, which replaces the sizes. So a workspace re-indexed onto another model
    does not copy, for the same bytes, chunks cut for the old one: uploading them again cuts them
    anew (docs/upgrading.md)."""
    embedders = list(embedders) or [configured_embedder()]
    parts: dict[str, Any] = {
        "chunk_target_tokens": settings.CHUNK_TARGET_TOKENS,
        "chunk_max_tokens": settings.CHUNK_MAX_TOKENS,
        "embedder": embedders[0].name,
        "chunking_scheme": CHUNKING_SCHEME,
    }
    if len(embedders) > 1:  # during a re-index: cut for both
        parts["target_embedder"] = embedders[1].name
    declared = [best for best in (getattr(e, "chunk_tokens", None) for e in embedders) if best is not None]
    if declared:  # the sizes they bound the settings' by (none: the key as it always was)
        parts["embedder_chunk_tokens"] = [min(b[0] for b in declared), min(b[1] for b in declared)]
    if chunking and chunking.get("type") == "static":
        parts["static_chunking"] = chunking.get("static")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def reusable_version(tenant: Tenant, sha256: str, key: str) -> DocumentVersion | None:
    """The tenant's published version with these bytes and settings, if any (the newest)."""
    return (
        DocumentVersion.objects.filter(
            document__tenant=tenant,
            document__deleted_at=None,
            document__published_version_id=F("id"),
            sha256=sha256,
            processing=key,
            deleted_at=None,
            job__status=Status.READY,
        )
        .order_by("-published_at")
        .first()
    )


def source_of(version: DocumentVersion) -> DocumentVersion | None:
    """The version to copy from, if it is still published (checked again at each stage)."""
    if version.reused_from_id is None:
        return None
    return DocumentVersion.objects.filter(
        pk=version.reused_from_id,
        deleted_at=None,
        document__deleted_at=None,
        document__published_version_id=F("id"),
    ).first()


def copy_pages(source: DocumentVersion, version: DocumentVersion) -> int:
    """The source's pages (parsed text and OCR text alike) as this version's; how many."""
    fields = ("number", "text", "blocks", "needs_ocr", "ocr_engine")
    rows = [
        Page(version=version, **dict(zip(fields, values, strict=True)))
        for values in Page.objects.filter(version=source).order_by("number").values_list(*fields)
    ]
    Page.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    return len(rows)


def copy_chunks(source: DocumentVersion, version: DocumentVersion) -> int:
    fields = ("ordinal", "text", "page_start", "page_end", "heading_path")
    rows = [
        Chunk(version=version, **dict(zip(fields, values, strict=True)))
        for values in Chunk.objects.filter(version=source).order_by("ordinal").values_list(*fields)
    ]
    Chunk.objects.filter(version=version).delete()
    Chunk.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def copy_vectors(source: DocumentVersion, version: DocumentVersion, embedder: str) -> int:
    """The source's vectors of ``embedder`` (0 when it has none of that embedder: embed anew)."""
    return search_index().copy_vectors(source.pk, version.pk, embedder)


def reused_from_out(version: DocumentVersion) -> dict[str, Any] | None:
    """What the upload answer says about a reuse: the source's document and version number."""
    if version.reused_from_id is None:
        return None
    source = DocumentVersion.objects.filter(pk=version.reused_from_id).values("document_id", "number").first()
    if source is None:
        return None
    return {"document_id": str(source["document_id"]), "version": source["number"]}
