"""Chunking: deterministic, structure-aware chunks; the same pages always give the same ordinals.

Sizes are the tenant's embedder's own tokens, and every chunk (with its title and heading path
as context) fits that model's window: what the model does not see of a chunk could never be found
by meaning. While a re-index runs, the smaller window of the two embedders bounds the chunks.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from documents.bulk_insert import insert_rows
from documents.causes import EMPTY_INPUT, TOO_MANY_CHUNKS
from documents.embedders.base import Embedder
from documents.engines.chunking import CHUNKING_SCHEME, Block, ChunkInputPage, chunk_for_model
from documents.models import Chunk, DocumentVersion, Page
from documents.services.dedup import copy_chunks, source_of
from documents.stages.common import stage_embedders, version_of
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


def chunk_sizes(strategy: Any, embedders: Sequence[Embedder] = ()) -> tuple[int, int, int]:
    """Target, maximum (without the overlap) and overlap in tokens: the settings', or those of
    the static chunking strategy a /v1 vector store file asked for (its maximum includes the
    overlap). The /v1 API reports the same numbers as the file's chunking strategy.

    The settings' sizes are also bounded by the sizes an embedder declares it ranks best at
    (``chunk_tokens``); a static strategy is what its caller asked for, bounded by the window only."""
    target, maximum = settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS
    static = (
        strategy.get("static") if isinstance(strategy, dict) and strategy.get("type") == "static" else None
    )
    if not isinstance(static, dict):
        for embedder in embedders:
            best = getattr(embedder, "chunk_tokens", None)
            if best is not None:
                target, maximum = min(target, best[0]), min(maximum, best[1])
        return min(target, maximum), maximum, 0
    overlap = int(static["chunk_overlap_tokens"])
    maximum = int(static["max_chunk_size_tokens"]) - overlap
    return min(target, maximum), maximum, overlap


def sizes_used(maximum: int, overlap: int) -> dict[str, int]:
    """The sizes a version's chunks were cut with, in OpenAI's static strategy's words."""
    return {"max_chunk_size_tokens": maximum + overlap, "chunk_overlap_tokens": overlap}


def sizes_for(embedder: Embedder, maximum: int, overlap: int) -> tuple[int, int]:
    """Maximum (without the overlap) and overlap as cut for ``embedder``: the whole chunk within
    its window, the overlap at most half of it."""
    limit = min(maximum + overlap, embedder.window)
    overlap = min(overlap, limit // 2)
    return limit - overlap, overlap


def planned_sizes(strategy: Any, embedders: Sequence[Embedder]) -> tuple[int, int, int, Embedder]:
    """Target, maximum and overlap the stage cuts by for ``embedders`` (the tenant's: two while a
    re-index runs), and the embedder whose tokens they count: the one with the smallest window,
    which bounds the whole chunk."""
    target, maximum, overlap = chunk_sizes(strategy, embedders)
    embedder = min(embedders, key=lambda e: e.window)
    maximum, overlap = sizes_for(embedder, maximum, overlap)
    return min(target, maximum), maximum, overlap, embedder


def chunking_record(embedder: Embedder, maximum: int, overlap: int) -> dict[str, object]:
    """What a version records of how its chunks were cut: the sizes (OpenAI's words), and the
    tokenizer, window and scheme they were measured by. A version cut for another embedder or
    scheme than the tenant's now needs re-ingesting to be cut for it (docs/upgrading.md)."""
    return {
        **sizes_used(maximum, overlap),
        "tokens_of": embedder.name,
        "window": embedder.window,
        "scheme": CHUNKING_SCHEME,
    }


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
    strategy, title = version.document.chunking_strategy, version.document.title
    embedders = stage_embedders(version)  # two while a re-index runs
    target, maximum, overlap, embedder = planned_sizes(strategy, embedders)
    chunks = chunk_for_model(
        input_pages(version.pk),
        title=title,
        count=embedder.count_tokens,
        window=embedder.window,
        target_tokens=target,
        max_tokens=maximum,
        overlap_tokens=overlap,
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
        DocumentVersion.objects.filter(pk=version.pk).update(
            chunking=chunking_record(embedder, maximum, overlap)
        )
