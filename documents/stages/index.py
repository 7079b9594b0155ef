"""Indexing: the version's chunks into the search index in fenced batches, then a probe through
the same hybrid search users run.

``ready`` is set by the engine right after this returns, in the same transaction as the
publish hook: so this stage must prove that the version is findable first. The entries it writes
are invisible to users until that commit points the document at the version.
"""

from __future__ import annotations

import itertools
import math

from django.conf import settings

from documents.bulk_insert import insert_rows
from documents.causes import EMPTY_INPUT, INDEX_WRITE_FAILED
from documents.engines.chunking import embedded_text
from documents.models import Chunk, ChunkVector, DocumentVersion, IndexEntry
from documents.retrieval.index import record_version
from documents.retrieval.text import query_tokens, search_text
from documents.search import search
from documents.stages.common import version_of
from documents.stages.embed import embed_missing
from jobs.context import StageContext
from jobs.errors import StageFailure

# Words of a chunk the probe searches for: a phrase, as a user would type it.
PROBE_WORDS = 12
PROBE_PAGE = 20  # chunks read at a time while looking for that phrase
ENTRY_FIELDS = (
    "tenant_id",
    "document_id",
    "version_id",
    "chunk_id",
    "ordinal",
    "batch",
    "embedder",
    "search_text",
)


def run(ctx: StageContext) -> None:
    version = version_of(ctx)
    # A re-index may have started or switched since the embedding stage (then the publish
    # refuses a version without the active embedder's vectors, and this retry adds them).
    embed_missing(ctx, version)
    ordinals = list(
        ChunkVector.objects.filter(version=version)
        .order_by("ordinal")
        .values_list("ordinal", flat=True)
        .distinct()  # a chunk has two vectors while a re-index runs
    )
    size = settings.INDEX_BATCH_SIZE
    batches = math.ceil(len(ordinals) / size)
    start = int(ctx.checkpoint.get("next_batch", 0))
    for batch in range(start, batches):
        ctx.check()
        part = ordinals[batch * size : (batch + 1) * size]
        with ctx.write(checkpoint={"next_batch": batch + 1}, done=batch + 1, total=batches):
            copy_batch(version, batch, part[0], part[-1] + 1)
    probe(ctx)


def copy_batch(version: DocumentVersion, batch: int, first: int, end: int) -> None:
    """Index the version's embedded chunks of ordinals ``first`` to ``end - 1`` as batch
    ``batch``; entries already there (a batch replayed after a lost commit answer) are left as
    they are. The full-text rows follow the entries (triggers on SQLite, a generated column on
    PostgreSQL); the vectors stay where the embedding stage wrote them."""
    embedded = dict(
        ChunkVector.objects.filter(version=version, ordinal__gte=first, ordinal__lt=end).values_list(
            "ordinal", "embedder"
        )
    )
    chunks = Chunk.objects.filter(version=version, ordinal__in=embedded).values_list("pk", "ordinal", "text")
    tenant_id, document_id, title = version.document.tenant_id, version.document_id, version.document.title
    # The full text holds the chunk with its context header, as the embedder saw it.
    rows = [
        (
            tenant_id,
            document_id,
            version.pk,
            pk,
            ordinal,
            batch,
            embedded[ordinal],
            search_text(embedded_text(title, text)),
        )
        for pk, ordinal, text in chunks
    ]
    insert_rows(IndexEntry, ENTRY_FIELDS, rows, skip_existing=True)
    # The words every entry's search text opens with (its title, as ``embedded_text`` puts it),
    # and the version's words with them counted once: the full-text ranking's page.
    record_version(version.pk, search_text(embedded_text(title, "")))


def probe(ctx: StageContext) -> None:
    """Search for a phrase of this version through the user's hybrid search, with the tenant
    filter applied and the version filter set to this (not yet published) version.

    The phrase is the start of the first chunk that has any searchable word; a version with none
    has no searchable content at all, which is an input problem, not an index one.
    """
    version = version_of(ctx)
    phrase = ""
    texts = Chunk.objects.filter(version=version).order_by("ordinal").values_list("text", flat=True)
    # Read a page of chunks at a time, stopping at the first usable one (plain LIMIT queries: on
    # PostgreSQL an iterator outside a transaction is a WITH HOLD cursor, which materialises
    # every chunk's text before the first row comes back).
    for start in itertools.count(0, PROBE_PAGE):
        page = list(texts[start : start + PROBE_PAGE])
        for text in page:
            words = text.split()[:PROBE_WORDS]
            if query_tokens(" ".join(words)):
                phrase = " ".join(words)
                break
        if phrase or len(page) < PROBE_PAGE:
            break
    if not phrase:
        raise StageFailure(EMPTY_INPUT.code, "no chunk has any searchable content")
    hits = search(version.document.tenant, phrase, k=5, version=version.pk)
    if not any(hit.version_id == version.pk for hit in hits):
        raise StageFailure(INDEX_WRITE_FAILED.code, "probe query did not find the version's chunks")
