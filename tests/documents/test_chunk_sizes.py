"""Chunk sizes an embedder ranks best at: e5 declares smaller chunks than the settings' defaults
(its semantic ranking, measured on real documentation, is better at them), and the chunk stage
cuts a workspace's new versions by them; the settings' own smaller sizes and a /v1 static
strategy still win, and a version cut by them is not reused for an upload cut by others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from documents.embedders import embedders_as_loaded
from documents.embedders.e5 import E5Embedder
from documents.embedders.hashing import HashingEmbedder
from documents.embedders.local import LocalModelEmbedder
from documents.engines.chunking import embedded_text
from documents.models import Chunk, DocumentVersion, Tenant
from documents.services.dedup import processing_key
from documents.stages.chunk import chunk_sizes
from jobs.models import StageRun, Status
from tests.documents.helpers import job_of, make_tenant, run_until_idle, upload

STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}


@pytest.fixture
def defaults(settings) -> None:
    settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS = 350, 500


def test_e5_bounds_the_default_sizes_by_its_own(defaults):
    assert E5Embedder.chunk_tokens[1] < 500
    target, maximum = E5Embedder.chunk_tokens
    assert chunk_sizes(None, [E5Embedder()]) == (target, maximum, 0)
    # A model that declares nothing keeps the settings' sizes.
    assert chunk_sizes(None, [LocalModelEmbedder()]) == (350, 500, 0)
    assert chunk_sizes(None) == (350, 500, 0)
    # During a re-index both embedders bound them.
    assert chunk_sizes(None, [LocalModelEmbedder(), E5Embedder()]) == (target, maximum, 0)


def test_smaller_settings_and_a_static_strategy_are_kept(settings):
    settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS = 20, 40
    assert chunk_sizes(None, [E5Embedder()]) == (20, 40, 0)
    settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS = 350, 500
    # What a /v1 caller asked for is not the embedder's to change (the window still bounds it).
    assert chunk_sizes(STATIC, [E5Embedder()]) == (350, 400, 400)


SENTENCE = "The keeper of lighthouse {n} wrote down the weather, the wind and every passing ship."


@pytest.mark.django_db(transaction=True)
def test_the_chunk_stage_cuts_new_versions_by_the_embedders_sizes(
    defaults, settings, tmp_path: Path, monkeypatch
):
    settings.MEDIA_ROOT = tmp_path / "media"
    text = "\n\n".join(" ".join(SENTENCE.format(n=n * 10 + i) for i in range(10)) for n in range(12))
    tenant = make_tenant("acme")

    def chunked(name: str) -> tuple[list[int], Any]:
        result = upload(tenant, text.encode(), name)
        assert result.job is not None
        run_until_idle(result.job.pk)
        version = DocumentVersion.objects.get(pk=result.version.pk)
        assert job_of(version).status == Status.READY
        texts = Chunk.objects.filter(version=version).values_list("text", flat=True)
        count = HashingEmbedder().count_tokens
        return [count(embedded_text(version.document.title, t)) for t in texts], version.chunking

    before, record = chunked("plain.txt")
    assert max(before) > 300 and record["max_chunk_size_tokens"] == 500
    key = processing_key()

    # The hashing embedder (the suite's) declaring sizes, as e5 does: words are its tokens.
    monkeypatch.setattr(HashingEmbedder, "chunk_tokens", (60, 80), raising=False)
    assert processing_key() != key  # the earlier version's chunks are not reused for these bytes
    after, record = chunked("again.txt")
    assert max(after) <= 80 and len(after) > 2 * len(before)
    assert record["max_chunk_size_tokens"] == 80


@pytest.mark.django_db(transaction=True)
def test_a_workspace_whose_embedder_this_deployment_cannot_build_still_takes_uploads(
    settings, tmp_path: Path
):
    # The dedup key and a waiting file's sizes read the workspace's embedders from its loaded
    # row; a stored name no longer available here is the stages' to report, not the upload's.
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("acme")
    Tenant.objects.filter(pk=tenant.pk).update(active_embedder="retired-model-v1")
    tenant = Tenant.objects.get(pk=tenant.pk)
    assert [e.name for e in embedders_as_loaded(tenant)] == [HashingEmbedder().name]
    result = upload(tenant, SENTENCE.format(n=1).encode(), "keeper.txt")
    assert result.job is not None and result.version.processing == processing_key()
    # The chunk stage needs it: the job fails at once with the reason and what to do, not as an
    # internal error retried in vain.
    job = run_until_idle(result.job.pk)
    assert (job.status, job.stage, job.error_code) == (Status.FAILED, "chunking", "embedder_unavailable")
    assert StageRun.objects.filter(job=job, stage="chunking").count() == 1  # not retried
    assert "embedding model is not available" in job.error_message
