"""Chunking: deterministic, structure-aware chunks; the same pages always give the same ordinals."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from documents.causes import EMPTY_INPUT, TOO_MANY_CHUNKS
from documents.engines.chunking import Block, ChunkInputPage, chunk_pages, with_overlap
from documents.models import Chunk, Document, DocumentVersion, Page
from documents.rows import insert_rows
from documents.services.dedup import copy_chunks, source_of
from documents.stages.common import version_of
from jobs.context import StageContext
from jobs.errors import StageFailure

CHUNK_FIELDS = ("version_id", "ordinal", "text", "page_start", "page_end", "heading_path")


def input_pages(version_id: uuid.UUID) -> list[ChunkInputPage]:
    """Pages as the chunker reads them: parsed blocks, or OCR text split into paragraphs."""
    pages = []
    for number, text, blocks in (
        Page.objects.filter(version_id=version_id).order_by("number").values_list("number", "text", "blocks")
    ):
        if blocks:
            items = [Block(b["kind"], b["text"], b.get("level", 0)) for b in blocks if b["text"].strip()]
        else:
            items = [Block("paragraph", part.strip()) for part in text.split("\n\n") if part.strip()]
        pages.append(ChunkInputPage(number=number, blocks=tuple(items)))
    return pages


def chunk_sizes(strategy: Any) -> tuple[int, int, int]:
    """Target, maximum (without the overlap) and overlap in tokens: the settings', or those of
    the static chunking strategy a /v1 vector store file asked for (its maximum includes the
    overlap). The /v1 API reports the same numbers as the file's chunking strategy."""
    target, maximum = settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS
    static = (
        strategy.get("static") if isinstance(strategy, dict) and strategy.get("type") == "static" else None
    )
    if not isinstance(static, dict):
        return target, maximum, 0
    overlap = int(static["chunk_overlap_tokens"])
    maximum = int(static["max_chunk_size_tokens"]) - overlap
    return min(target, maximum), maximum, overlap


def sizes_used(maximum: int, overlap: int) -> dict[str, int]:
    """The sizes a version's chunks were cut with, in OpenAI's static strategy's words."""
    return {"max_chunk_size_tokens": maximum + overlap, "chunk_overlap_tokens": overlap}


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    source = source_of(version)
    if source is not None:  # dedup: the same pages and settings give the same chunks; copied
        total = Chunk.objects.filter(version=source).count()
        if total:
            with ctx.write(checkpoint={"chunks": total, "reused": True}, done=total, total=total):
                copy_chunks(source, version)
                DocumentVersion.objects.filter(pk=version.pk).update(chunking=source.chunking)
            return
    strategy = Document.objects.filter(pk=version.document_id).values_list("chunking_strategy", flat=True)
    target, maximum, overlap = chunk_sizes(strategy.first())
    chunks = with_overlap(
        chunk_pages(input_pages(version.pk), target_tokens=target, max_tokens=maximum), overlap
    )
    if not chunks:
        raise StageFailure(EMPTY_INPUT.code, "no text to chunk after parsing and OCR")
    if len(chunks) > settings.DOCUMENTS_MAX_CHUNKS:
        # Every chunk becomes an embedding and an index entry: a small file of 60,000 repeated
        # pages must not fan out into 60,000 of each.
        raise StageFailure(
            TOO_MANY_CHUNKS.code, f"{len(chunks)} chunks, over the limit of {settings.DOCUMENTS_MAX_CHUNKS}"
        )
    rows = [(version.pk, c.ordinal, c.text, c.page_start, c.page_end, list(c.heading_path)) for c in chunks]
    # Replacing the version's chunks in one fenced transaction keeps a retry from mixing two runs.
    with ctx.write(checkpoint={"chunks": len(rows)}, done=len(rows), total=len(rows)):
        Chunk.objects.filter(version=version).delete()
        insert_rows(Chunk, CHUNK_FIELDS, rows)
        DocumentVersion.objects.filter(pk=version.pk).update(chunking=sizes_used(maximum, overlap))
