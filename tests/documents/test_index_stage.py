"""The indexing stage writes each batch of entries: every chunk of the version gets exactly one
index entry with its search text, batch by batch, its vector stays in one place (the embedding
stage's row), and a second pass over a batch already written (a worker lost after its commit)
adds nothing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from documents.causes import EMPTY_INPUT
from documents.engines.chunking import embedded_text
from documents.models import Chunk, ChunkVector, DocumentVersion, IndexEntry
from documents.retrieval.text import search_text
from documents.stages import index as index_stage
from documents.stages.index import copy_batch
from jobs.errors import StageFailure
from jobs.models import Status
from tests.documents import files
from tests.documents.helpers import job_of, make_tenant, run_until_idle, top_hit, upload

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = [f"Page {n} speaks of lighthouse number {n} and the tide tables of bay {n}." * 6 for n in range(8)]


@pytest.fixture(autouse=True)
def small_batches(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.INDEX_BATCH_SIZE = 3
    settings.CHUNK_TARGET_TOKENS = 40
    settings.CHUNK_MAX_TOKENS = 60


def test_every_chunk_is_indexed_once_with_its_search_text_in_batches():
    tenant = make_tenant("acme")
    result = upload(tenant, files.text_pdf(PAGES), "tides.pdf")
    assert result.job is not None
    run_until_idle(result.job.pk)
    version = DocumentVersion.objects.get(pk=result.version.pk)
    assert job_of(version).status == Status.READY

    chunks = dict(Chunk.objects.filter(version=version).values_list("ordinal", "pk"))
    texts = dict(Chunk.objects.filter(version=version).values_list("ordinal", "text"))
    entries = list(
        IndexEntry.objects.filter(version=version)
        .order_by("ordinal")
        .values_list("ordinal", "batch", "chunk_id", "search_text", "tenant_id", "document_id")
    )
    assert len(chunks) > 7  # several batches of 3
    assert [e[0] for e in entries] == sorted(chunks)
    assert [e[1] for e in entries] == [n // 3 for n in range(len(chunks))]
    assert all(e[2] == chunks[e[0]] for e in entries)
    # The full text holds the chunk with its context header (the document's title first).
    title = version.document.title
    assert title and not any(title in text for text in texts.values())
    assert all(e[3] == search_text(embedded_text(title, texts[e[0]])) and e[3] for e in entries)
    assert all(e[3].startswith(search_text(title) + " ") for e in entries)
    assert ChunkVector.objects.filter(version=version).count() == len(chunks)
    assert not any(f.name == "vector" for f in IndexEntry._meta.get_fields())  # stored once
    assert {(e[4], e[5]) for e in entries} == {(tenant.pk, version.document_id)}
    hit = top_hit(tenant, "lighthouse number 5")
    assert hit is not None and hit.version_id == version.pk

    # The same batch again, as a worker that lost its lease after committing would write it.
    copy_batch(version, 0, 0, 3)
    assert IndexEntry.objects.filter(version=version).count() == len(chunks)


def test_the_probe_reads_past_a_page_of_chunks_without_a_searchable_word(monkeypatch):
    tenant = make_tenant("acme")
    result = upload(tenant, files.text_pdf(PAGES), "tides.pdf")
    assert result.job is not None
    run_until_idle(result.job.pk)
    version = DocumentVersion.objects.get(pk=result.version.pk)
    assert job_of(version).status == Status.READY
    # The first page of chunks (2 at a time here) has nothing a query could look up.
    monkeypatch.setattr(index_stage, "PROBE_PAGE", 2)
    Chunk.objects.filter(version=version, ordinal__lt=3).update(text="-- ... --")
    ctx = SimpleNamespace(input={"version_id": str(version.pk)}, shared={})
    index_stage.probe(ctx)  # the phrase of chunk 3 finds the version: it passes
    Chunk.objects.filter(version=version).update(text="-- ... --")
    with pytest.raises(StageFailure) as failure:
        index_stage.probe(ctx)
    assert failure.value.cause == EMPTY_INPUT.code
