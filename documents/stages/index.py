"""Indexing: vectors into the search index in fenced batches, then a probe through real search.

``ready`` is set by the engine right after this returns, in the same transaction as the
publish hook: so this stage must prove that the version is findable first.
"""

from __future__ import annotations

import math

import numpy as np
from django.conf import settings
from django.db import connection

from documents.causes import EMPTY_INPUT, INDEX_WRITE_FAILED
from documents.models import Chunk, ChunkVector, DocumentVersion, IndexEntry
from documents.search import search
from documents.stages.common import version_of
from jobs.context import StageContext
from jobs.errors import StageFailure

# Each batch copies its vectors inside the database: they never travel through this process.
COPY_BATCH = """
INSERT INTO {index} (tenant_id, document_id, version_id, chunk_id, ordinal, batch, embedder, vector)
SELECT %(tenant)s, %(document)s, v.version_id, c.id, v.ordinal, %(batch)s, v.embedder, v.vector
FROM {vectors} v JOIN {chunks} c ON c.version_id = v.version_id AND c.ordinal = v.ordinal
WHERE v.version_id = %(version)s AND v.ordinal >= %(first)s AND v.ordinal < %(end)s
ON CONFLICT DO NOTHING
"""


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    ordinals = list(
        ChunkVector.objects.filter(version=version).order_by("ordinal").values_list("ordinal", flat=True)
    )
    size = int(settings.INDEX_BATCH_SIZE)
    batches = math.ceil(len(ordinals) / size)
    start = int(ctx.checkpoint.get("next_batch", 0))
    for batch in range(start, batches):
        ctx.check()
        part = ordinals[batch * size : (batch + 1) * size]
        with ctx.write(checkpoint={"next_batch": batch + 1}, done=batch + 1, total=batches):
            copy_batch(version, batch, part[0], part[-1] + 1)
    probe(ctx)


def copy_batch(version: DocumentVersion, batch: int, first: int, end: int) -> None:
    """Index the version's vectors of ordinals ``first`` to ``end - 1`` as batch ``batch``; rows
    already there (a batch replayed after a lost commit answer) are left as they are."""
    sql = COPY_BATCH.format(
        index=connection.ops.quote_name(IndexEntry._meta.db_table),
        vectors=connection.ops.quote_name(ChunkVector._meta.db_table),
        chunks=connection.ops.quote_name(Chunk._meta.db_table),
    )
    uuid = DocumentVersion._meta.pk.get_db_prep_value  # as the backend stores UUIDs
    params = {
        "tenant": version.document.tenant_id,
        "document": uuid(version.document_id, connection),
        "version": uuid(version.pk, connection),
        "batch": batch,
        "first": first,
        "end": end,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def probe(ctx: StageContext) -> None:
    """Search for one of this version's chunks through the real search path, with the tenant
    filter applied and the version filter set to this (not yet published) version.

    The probe uses the first chunk that has anything searchable (a non-zero vector); a version
    with none has no searchable content at all, which is an input problem, not an index one.
    """
    version = version_of(ctx)
    probe_ordinal = None
    vectors = ChunkVector.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "vector")
    for ordinal, vector in vectors.iterator(chunk_size=20):  # stops reading at the first hit
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
