"""Embedding: chunks in numbered batches; a finished batch is never embedded or written twice."""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings

from documents.embedders import configured_embedder
from documents.models import Chunk, ChunkVector
from documents.stages.common import version_of
from jobs.context import StageContext


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    chunks = list(Chunk.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "text"))
    size = int(settings.EMBEDDING_BATCH_SIZE)
    batches = math.ceil(len(chunks) / size)
    embedder = configured_embedder()
    start = int(ctx.checkpoint.get("next_batch", 0))
    ctx.progress(start, batches)
    for batch in range(start, batches):
        ctx.check()
        part = chunks[batch * size : (batch + 1) * size]
        # The provider call happens outside any transaction; only the write below is fenced.
        vectors = np.asarray(embedder.embed([text for _, text in part]), dtype=np.float32)
        rows = [
            ChunkVector(
                version=version, ordinal=ordinal, batch=batch, embedder=embedder.name, vector=v.tobytes()
            )
            for (ordinal, _), v in zip(part, vectors, strict=True)
        ]
        with ctx.write(checkpoint={"next_batch": batch + 1}, done=batch + 1, total=batches):
            ChunkVector.objects.bulk_create(rows, ignore_conflicts=True)
