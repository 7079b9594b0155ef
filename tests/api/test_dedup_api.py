"""Dedup: bytes already ingested and published in the same tenant, with the same processing
settings, are copied by the new version's stages instead of processed again: no OCR engine and
no embedder call (counted on the real engines), the reuse recorded and answered, the copy found
by search once ready. A failed earlier run, another tenant's bytes or other settings are never
reused. Runs on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.embedders import configured_embedder
from documents.engines import ocr
from documents.models import Chunk, ChunkVector, DocumentVersion, Page
from documents.stages import ocr as ocr_stage
from jobs.models import Status
from tests.api.conftest import Caller, drive
from tests.documents import files

pytestmark = pytest.mark.django_db(transaction=True)  # runs jobs: workers commit


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts calls of the real OCR (a page recognised in the sandbox child) and of the real
    embedder (they still run in full); the embedder's texts are kept too (the indexing probe
    embeds its query phrase, a search)."""
    counted: dict[str, Any] = {"ocr": 0, "embed": 0, "texts": []}
    ocr.get_engine(ocr.default_engine_name())  # an OCR engine is installed
    embedder_type = type(configured_embedder())
    sandbox_call, embed = ocr_stage.sandbox_call, embedder_type.embed

    def counting_sandbox_call(name: str, *args: Any, **kwargs: Any) -> Any:
        counted["ocr"] += name == "recognize_page"
        return sandbox_call(name, *args, **kwargs)

    def counting_embed(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted["embed"] += 1
        counted["texts"] += list(args[0])
        return embed(self, *args, **kwargs)

    monkeypatch.setattr(ocr_stage, "sandbox_call", counting_sandbox_call)
    monkeypatch.setattr(embedder_type, "embed", counting_embed)
    return counted


def post(caller: Caller, name: str, data: bytes) -> dict[str, Any]:
    response = caller.client.post(
        "/api/documents/", {"file": SimpleUploadedFile(name, data)}, format="multipart"
    )
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def hits(caller: Caller, query: str) -> set[str]:
    response = caller.client.get("/api/search", {"q": query, "k": "20", "mode": "lexical"})
    return {h["document_id"] for h in response.json()["results"]}


def outputs(version: DocumentVersion) -> tuple[list[Any], list[Any], list[Any]]:
    pages = list(Page.objects.filter(version=version).order_by("number").values_list("number", "text"))
    chunks = list(Chunk.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "text"))
    vectors = list(
        ChunkVector.objects.filter(version=version).order_by("ordinal").values_list("ordinal", "embedder")
    )
    return pages, chunks, vectors


def test_the_same_scanned_bytes_are_copied_without_ocr_or_embedding(alice: Caller, calls: dict[str, Any]):
    scan = files.scanned_pdf()
    first = post(alice, "scan.pdf", scan)
    assert first["reused_from"] is None
    assert drive(first["job_id"]).status == Status.READY
    assert calls["ocr"] > 0 and calls["embed"] > 0
    calls.update(ocr=0, embed=0, texts=[])

    second = post(alice, "scan again.pdf", scan)

    assert second["reused_from"] == {"document_id": first["document_id"], "version": 1}
    job = drive(second["job_id"])
    assert job.status == Status.READY and job.progress == 100
    assert calls["ocr"] == 0  # no OCR engine ran for the copy
    source = DocumentVersion.objects.get(document_id=first["document_id"])
    copy = DocumentVersion.objects.get(document_id=second["document_id"])
    assert copy.reused_from_id == source.pk
    assert outputs(copy) == outputs(source) and outputs(copy)[1]
    chunk_texts = {text for _, text in outputs(copy)[1]}
    assert not chunk_texts & set(calls["texts"])  # no chunk embedded again: only the probe's query
    assert calls["embed"] <= 1
    assert set(Page.objects.filter(version=copy).values_list("ocr_attempts", flat=True)) == {0}
    assert set(job.events.filter(name="proceed").values_list("stage", flat=True)) >= {"ocr", "chunking"}
    # Found by search after ready, as its own document.
    word = outputs(copy)[1][0][1].split()[0]
    assert {first["document_id"], second["document_id"]} <= hits(alice, word)


def test_a_failed_run_is_not_reused_and_other_tenants_or_settings_never_are(
    alice: Caller, mallory: Caller, settings: Any, calls: dict[str, Any]
):
    data = files.text_pdf(["Amber falcon ledger, page one."])
    failed = post(alice, "a.pdf", data)
    settings.DOCUMENTS_MAX_PAGES = 0  # this run fails at parsing (too_many_pages)
    assert drive(failed["job_id"]).status == Status.FAILED
    settings.DOCUMENTS_MAX_PAGES = 10_000

    fresh = post(alice, "b.pdf", data)
    assert fresh["reused_from"] is None  # the failed run is no source
    assert drive(fresh["job_id"]).status == Status.READY

    assert post(mallory, "c.pdf", data)["reused_from"] is None  # another tenant's bytes
    settings.CHUNK_TARGET_TOKENS = 120
    assert post(alice, "d.pdf", data)["reused_from"] is None  # other chunking settings
    settings.CHUNK_TARGET_TOKENS = 350
    assert post(alice, "e.pdf", data)["reused_from"] == {"document_id": fresh["document_id"], "version": 1}
