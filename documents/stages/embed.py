"""Embedding: chunks in numbered batches; a finished batch is never embedded or written twice.

The model gets each chunk with its context header (:func:`documents.engines.chunking.embedded_text`:
the document's title, then the heading path the chunk starts with), which the chunking stage
sized to fit the model's window.

While the tenant has a re-index target, each batch is embedded with the active embedder and the
target one (docs/architecture.md, re-index): a version published during a re-index needs no second pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from django.conf import settings

from documents.embedders.base import Embedder
from documents.engines.chunking import embedded_text
from documents.models import Chunk, ChunkVector, DocumentVersion
from documents.retrieval.index import search_index
from documents.services.dedup import copy_vectors, source_of
from documents.stages.common import stage_embedders, version_of
from jobs.context import StageContext


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    title = version.document.title
    chunks = [
        (ordinal, embedded_text(title, text))
        for ordinal, text in Chunk.objects.filter(version=version)
        .order_by("ordinal")
        .values_list("ordinal", "text")
    ]
    size = settings.EMBEDDING_BATCH_SIZE
    batches = math.ceil(len(chunks) / size)
    embedders = stage_embedders(version)
    source = source_of(version)
    if source is not None and all(
        ChunkVector.objects.filter(version=source, embedder=embedder.name).count() == len(chunks)
        for embedder in embedders
    ):  # dedup: every chunk's vector of every embedder exists already; copied (no embedder call)
        with ctx.write(checkpoint={"next_batch": batches, "reused": True}, done=batches, total=batches):
            for embedder in embedders:
                copy_vectors(source, version, embedder.name)
        return
    start = int(ctx.checkpoint.get("next_batch", 0))
    if batches - start > 1:  # the total shown before the first batch; one batch reports it at once
        ctx.progress(start, batches)
    for batch in range(start, batches):
        ctx.check()
        part = chunks[batch * size : (batch + 1) * size]
        # The provider calls happen outside any transaction; only the write below is fenced.
        embedded = [
            (embedder, np.asarray(embedder.embed([text for _, text in part]), dtype=np.float32))
            for embedder in embedders
        ]
        for embedder, vectors in embedded:
            prepare_index(embedder, vectors)
        with ctx.write(checkpoint={"next_batch": batch + 1}, done=batch + 1, total=batches):
            for embedder, vectors in embedded:
                write_vectors(version, batch, embedder, [o for o, _ in part], vectors)


def write_vectors(
    version: DocumentVersion, batch: int, embedder: Embedder, ordinals: Sequence[int], vectors: np.ndarray
) -> None:
    """Store ``embedder``'s vectors of the version's chunks ``ordinals`` (rows already there are
    left as they are), in one statement."""
    search_index().write_vectors(version.pk, batch, embedder.name, ordinals, vectors)


def prepare_index(embedder: Embedder, vectors: np.ndarray) -> None:
    """What the index needs for ``embedder``'s vectors (created once, outside the fenced write)."""
    if len(vectors):
        search_index().prepare(embedder.name, int(vectors.shape[1]))


def embed_missing(ctx: StageContext, version: DocumentVersion) -> None:
    """Embed the version's chunks that lack a vector of one of the tenant's embedders now: a
    re-index started (or switched) after this version's embedding stage ran. Nothing to do,
    and two counts, in the usual case."""
    size = settings.EMBEDDING_BATCH_SIZE
    chunks = Chunk.objects.filter(version=version)
    total = chunks.count()
    for embedder in stage_embedders(version):
        have = ChunkVector.objects.filter(version=version, embedder=embedder.name)
        if have.count() >= total:
            continue
        done = set(have.values_list("ordinal", flat=True))
        title = version.document.title
        todo = [
            (o, embedded_text(title, t))
            for o, t in chunks.order_by("ordinal").values_list("ordinal", "text")
            if o not in done
        ]
        for start in range(0, len(todo), size):
            ctx.check()
            part = todo[start : start + size]
            vectors = np.asarray(embedder.embed([text for _, text in part]), dtype=np.float32)
            prepare_index(embedder, vectors)
            with ctx.write():
                write_vectors(version, start // size, embedder, [o for o, _ in part], vectors)
