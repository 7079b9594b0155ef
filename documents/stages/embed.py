"""Embedding: chunks in numbered batches; a finished batch is never embedded or written twice."""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings
from django.db import connection

from documents.embedders import configured_embedder
from documents.models import Chunk, ChunkVector
from documents.retrieval import pgvector
from documents.stages.common import version_of
from jobs.context import StageContext


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    chunks = list(Chunk.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "text"))
    size = int(settings.EMBEDDING_BATCH_SIZE)
    batches = math.ceil(len(chunks) / size)
    embedder = configured_embedder()
    start = int(ctx.checkpoint.get("next_batch", 0))
    # With pgvector the vector is stored once, in its column (``ChunkVector.vector`` stays empty).
    in_pgvector = pgvector.enabled(connection)
    ctx.progress(start, batches)
    for batch in range(start, batches):
        ctx.check()
        part = chunks[batch * size : (batch + 1) * size]
        # The provider call happens outside any transaction; only the write below is fenced.
        vectors = np.asarray(embedder.embed([text for _, text in part]), dtype=np.float32)
        rows = [
            ChunkVector(
                version=version,
                ordinal=ordinal,
                batch=batch,
                embedder=embedder.name,
                vector=b"" if in_pgvector else v.tobytes(),
            )
            for (ordinal, _), v in zip(part, vectors, strict=True)
        ]
        if in_pgvector:
            pgvector.ensure_index(connection, embedder.name, int(vectors.shape[1]))
        with ctx.write(checkpoint={"next_batch": batch + 1}, done=batch + 1, total=batches):
            ChunkVector.objects.bulk_create(rows, ignore_conflicts=True)
            if in_pgvector:
                pgvector.write(
                    connection, version.pk, {o: v for (o, _), v in zip(part, vectors, strict=True)}
                )
