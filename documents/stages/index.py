"""Indexing: vectors into the search index in fenced batches, then a probe through real search.

``ready`` is set by the engine right after this returns, in the same transaction as the
publish hook: so this stage must prove that the version is findable first.
"""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings

from documents.models import Chunk, ChunkVector, IndexEntry
from documents.search import search
from documents.stages.common import version_of
from jobs.context import StageContext
from jobs.errors import EMPTY_INPUT, INDEX_WRITE_FAILED, StageFailure


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    document = version.document
    vectors = list(
        ChunkVector.objects.filter(version=version)
        .order_by("ordinal")
        .values_list("ordinal", "embedder", "vector")
    )
    chunk_ids = dict(Chunk.objects.filter(version=version).values_list("ordinal", "pk"))
    size = int(settings.INDEX_BATCH_SIZE)
    batches = math.ceil(len(vectors) / size)
    start = int(ctx.checkpoint.get("next_batch", 0))
    for batch in range(start, batches):
        ctx.check()
        rows = [
            IndexEntry(
                tenant_id=document.tenant_id,
                document=document,
                version=version,
                chunk_id=chunk_ids[ordinal],
                ordinal=ordinal,
                batch=batch,
                embedder=embedder,
                vector=bytes(vector),
            )
            for ordinal, embedder, vector in vectors[batch * size : (batch + 1) * size]
        ]
        with ctx.write(checkpoint={"next_batch": batch + 1}):
            IndexEntry.objects.bulk_create(rows, ignore_conflicts=True)
        ctx.progress(batch + 1, batches)
    probe(ctx)


def probe(ctx: StageContext) -> None:
    """Search for one of this version's chunks through the real search path, with the tenant
    filter applied and the version filter set to this (not yet published) version.

    The probe uses the first chunk that has anything searchable (a non-zero vector); a version
    with none has no searchable content at all, which is an input problem, not an index one.
    """
    version = version_of(ctx)
    probe_ordinal = None
    for ordinal, vector in (
        ChunkVector.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "vector")
    ):
        if np.frombuffer(bytes(vector), dtype=np.float32).any():
            probe_ordinal = ordinal
            break
    if probe_ordinal is None:
        raise StageFailure(EMPTY_INPUT.code, "no chunk has any searchable content")
    text = Chunk.objects.get(version=version, ordinal=probe_ordinal).text
    # The whole chunk: it is bounded by the chunker, and cutting it could cut its only word.
    hits = search(version.document.tenant, text, k=5, version=version.pk)
    if not any(hit.version_id == version.pk for hit in hits):
        raise StageFailure(INDEX_WRITE_FAILED.code, "probe query did not find the version's chunks")
