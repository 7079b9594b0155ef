"""The document pipeline run in this process by the real executor, on real files: every kind
reaches ``ready`` and is searchable at that moment; OCR runs only where needed; progress is
honest; bad input fails once, with its cause, and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from documents.models import Chunk, DocumentVersion, Page
from jobs.audit import violations
from jobs.executor import run_job
from jobs.models import JobEvent, StageRun, Status
from tests.documents import files
from tests.documents.helpers import (
    NO_OUTPUTS,
    hits_for,
    job_of,
    make_tenant,
    output_counts,
    run_until_idle,
    top_hit,
    upload,
)
from tests.pages.helpers import scanned_pages_pdf

pytestmark = pytest.mark.django_db(transaction=True)

PNG_PHRASE = "PELICAN LANTERN 2718"


@pytest.fixture(autouse=True)
def fast_engine(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    settings.JOBS_PROGRESS_EVENT_SECONDS = 0


@pytest.fixture
def tenant():
    return make_tenant("acme")


def ingest(tenant, data: bytes, filename: str) -> DocumentVersion:
    result = upload(tenant, data, filename)
    assert result.job is not None
    run_until_idle(result.job.pk)
    return DocumentVersion.objects.get(pk=result.version.pk)


KINDS = [
    pytest.param(
        files.text_pdf, "a.pdf", "pdf", "Cobalt harbor wakes before the fishing boats", id="text-pdf"
    ),
    pytest.param(files.scanned_pdf, "b.pdf", "pdf", files.SCANNED_PHRASE, id="scanned-pdf"),
    pytest.param(files.docx_document, "c.docx", "docx", "North | 120 | 5%", id="docx-table"),
    pytest.param(lambda: files.HTML_PAGE.encode(), "d.html", "html", "The boats left at dawn.", id="html"),
    pytest.param(lambda: files.MARKDOWN_DOC.encode(), "e.md", "markdown", "Mostly swallows", id="markdown"),
    pytest.param(
        lambda: files.CHINESE_TEXT.encode("gb18030"), "f.txt", "text", "渔船在黎明出发", id="gb18030-text"
    ),
    pytest.param(files.chinese_scanned_pdf, "g.pdf", "pdf", files.CHINESE_SCANNED_PHRASE, id="chinese-scan"),
    pytest.param(lambda: files.png([PNG_PHRASE]), "h.png", "png", PNG_PHRASE, id="png"),
]


@pytest.mark.parametrize(("make", "filename", "kind", "phrase"), KINDS)
def test_each_kind_reaches_ready_and_is_found_by_its_phrase(tenant, make, filename, kind, phrase):
    # A decoy in the same tenant: the phrase must find its own document, not just any document.
    decoy = ingest(tenant, files.text_pdf(["Unrelated decoy text about glaciers."]), "decoy.pdf")
    version = ingest(tenant, make(), filename)
    assert version.kind == kind
    job = job_of(version)
    assert (job.status, job.progress, job.error_code) == (Status.READY, 100.0, "")
    assert version.document.published_version_id == version.pk
    hit = top_hit(tenant, phrase)  # at the moment the job is ready
    assert hit is not None, f"{phrase!r} found nothing"
    assert (hit.document_id, hit.version_id, hit.version) == (version.document_id, version.pk, 1)
    assert phrase in hit.snippet
    assert hit.document_id != decoy.document_id
    assert violations() == {}


def test_gb18030_text_is_decoded_with_its_encoding(tenant):
    version = ingest(tenant, files.CHINESE_TEXT.encode("gb18030"), "notes.txt")
    assert (version.kind, version.encoding) == ("text", "gb18030")
    text = " ".join(Chunk.objects.filter(version=version).values_list("text", flat=True))
    assert "港口笔记" in text and "黄昏返回" in text


def test_a_scanned_pdf_is_ocrd_only_on_its_image_page(tenant):
    version = ingest(tenant, files.scanned_pdf(), "scan.pdf")
    job = job_of(version)
    assert job.status == Status.READY
    assert "ocr" not in job.skipped_stages
    assert StageRun.objects.get(job=job, stage="ocr").outcome == StageRun.Outcome.ADVANCED
    pages = {p.number: p for p in Page.objects.filter(version=version)}
    assert sorted(pages) == [1, 2, 3]
    assert (pages[2].needs_ocr, pages[2].ocr_attempts) == (True, 1)
    assert pages[2].ocr_engine in ("tesseract", "rapidocr")
    assert files.SCANNED_PHRASE in pages[2].text
    for number in (1, 3):
        assert (pages[number].needs_ocr, pages[number].ocr_attempts, pages[number].ocr_engine) == (
            False,
            0,
            "",
        )
    assert files.PAGE_PHRASES[0] in pages[1].text and files.PAGE_PHRASES[2] in pages[3].text
    hit = top_hit(tenant, files.SCANNED_PHRASE)
    assert hit is not None and hit.page_start <= 2 <= hit.page_end


def test_ocr_reports_progress_after_each_page_not_only_after_each_batch(tenant, settings):
    settings.OCR_BATCH_SIZE = 4
    version = ingest(tenant, scanned_pages_pdf(5), "scan.pdf")
    job = job_of(version)
    assert job.status == Status.READY
    counts = [
        e.processed for e in JobEvent.objects.filter(job=job, stage="ocr", name="progress").order_by("id")
    ]
    # Pages 1-3 inside the first batch of 4 are reported before its checkpoint (page 4).
    assert [c for c in counts if c is not None and c > 0] == [1, 2, 3, 4, 5], counts


def test_html_script_style_and_template_text_is_not_searchable(tenant):
    version = ingest(tenant, files.HTML_PAGE.encode(), "page.html")
    assert job_of(version).status == Status.READY
    text = " ".join(Chunk.objects.filter(version=version).values_list("text", flat=True))
    assert "Harbor" in text and "boats left" in text
    for marker in ("SCRIPT_MARKER", "NOSCRIPT_MARKER", "TEMPLATE_MARKER", "tracking", "color: red"):
        assert marker not in text
    for query in ("SCRIPT_MARKER", "var tracking", "document.write", "NOSCRIPT_MARKER enable javascript"):
        assert hits_for(tenant, query) == [], query


def test_docx_table_cells_are_indexed_as_table_rows(tenant):
    version = ingest(tenant, files.docx_document(), "report.docx")
    hit = top_hit(tenant, "Region Revenue Growth North South")
    assert hit is not None and hit.version_id == version.pk
    chunk_text = Chunk.objects.get(version=version, ordinal=hit.ordinal).text
    assert "North | 120 | 5%" in chunk_text and "South | 98 | -2%" in chunk_text


def test_a_text_only_pdf_skips_ocr_and_progress_only_rises_to_100_at_ready(tenant):
    version = ingest(tenant, files.text_pdf(), "text.pdf")
    job = job_of(version)
    assert job.status == Status.READY
    assert job.skipped_stages == ["ocr"]
    # Parsing already knew no page needs OCR: the job passed over it in the same transition, so
    # OCR never ran (no run of it) and never showed as running.
    assert not StageRun.objects.filter(job=job, stage="ocr").exists()
    assert not JobEvent.objects.filter(job=job, stage="ocr").exists()
    passed = JobEvent.objects.get(job=job, reason__startswith="parsing done")
    assert (passed.stage, passed.reason) == (
        "chunking",
        "parsing done; ocr skipped; chunking continued by the same worker",
    )
    assert not Page.objects.filter(version=version, ocr_attempts__gt=0).exists()

    events = list(JobEvent.objects.filter(job=job).order_by("id"))
    progress = [e.progress for e in events]
    assert progress == sorted(progress), progress
    assert any(0 < p < 100 for p in progress if p is not None)
    assert [e.progress for e in events if e.progress == 100] == [100.0]
    assert (events[-1].name, events[-1].to_status, events[-1].progress) == ("publish", "ready", 100.0)
    # Stage weights 20/25/15/25/15: the skipped OCR stage counts as done.
    advances = [e.progress for e in events if e.name in ("advance", "proceed")]
    assert advances == [45.0, 60.0, 85.0]


FAILURES = [
    pytest.param(files.encrypted_pdf, "locked.pdf", "encrypted_input", id="encrypted-pdf"),
    pytest.param(lambda: files.truncated(files.text_pdf()), "cut.pdf", "corrupt_input", id="truncated-pdf"),
    pytest.param(lambda: b"   \n\n \t \r\n  ", "blank.txt", "empty_input", id="whitespace-text"),
    pytest.param(files.empty_docx, "blank.docx", "empty_input", id="empty-docx"),
]


@pytest.mark.parametrize(("make", "filename", "code"), FAILURES)
def test_bad_input_fails_at_parsing_once_with_its_cause_and_leaves_nothing(tenant, make, filename, code):
    version = ingest(tenant, make(), filename)
    job = job_of(version)
    assert (job.status, job.stage, job.error_code) == (Status.FAILED, "parsing", code)
    assert job.state_word() == "parse_failed"
    assert job.attempt == 1
    assert job.cleanup_from == ""
    assert job.error_message and "Traceback" not in job.error_message and "/" not in job.error_message
    runs = list(StageRun.objects.filter(job=job).values_list("stage", "outcome", "error_code"))
    assert runs == [("parsing", "failed", code)]
    assert run_job(job.pk) == "not claimed"  # no automatic retry
    assert output_counts(version) == NO_OUTPUTS
    assert version.document.published_version_id is None


def test_a_blank_scanned_page_fails_at_chunking_and_keeps_only_earlier_outputs(tenant):
    blank_scan = files.image_bytes(files.Image.new("L", (800, 600), color=255), "PNG")
    version = ingest(tenant, blank_scan, "blank.png")
    job = job_of(version)
    assert (job.status, job.error_code, job.state_word()) == (Status.FAILED, "empty_input", "chunk_failed")
    assert job.attempt == 1
    # The failed stage (chunking) and later ones left nothing; parsing/OCR output stays for a retry.
    assert output_counts(version) == {"pages": 1, "chunks": 0, "vectors": 0, "index": 0}
    assert Page.objects.get(version=version).ocr_attempts == 0  # blank: never sent to the engine


def test_a_document_whose_first_chunk_has_no_words_still_becomes_ready(tenant):
    version = ingest(tenant, "★★★★★\n\n# Reviews\n\nThe hotel was clean and quiet.\n".encode(), "r.md")
    assert Chunk.objects.filter(version=version).count() == 2
    assert job_of(version).status == Status.READY
    hit = top_hit(tenant, "hotel clean quiet")
    assert hit is not None and hit.version_id == version.pk


def test_a_document_without_any_searchable_word_fails_once_as_empty_input(tenant):
    version = ingest(tenant, "★ ☆ ★ ☆ ★\n\n♥ ♦ ♣ ♠".encode(), "stars.txt")
    job = job_of(version)
    assert (job.status, job.error_code, job.attempt) == (Status.FAILED, "empty_input", 1)


def test_plain_paragraph_pages_chunk_as_their_parsed_blocks_would(tenant, tmp_path):
    # Such pages are stored as text only; the chunks must be those of the parsed blocks.
    from django.conf import settings

    from documents.engines.chunking import ChunkInputPage, chunk_pages
    from documents.engines.parsing import parse
    from documents.engines.sniff import Kind

    pages = ["First paragraph on harbor tides.\n\nSecond paragraph, about the boats.", "Only one here."] * 3
    data = files.text_pdf(pages)
    version = ingest(tenant, data, "paragraphs.pdf")
    assert job_of(version).status == Status.READY
    assert list(Page.objects.filter(version=version).values_list("blocks", flat=True)) == [[]] * len(pages)

    path = tmp_path / "paragraphs.pdf"
    path.write_bytes(data)
    parsed = [ChunkInputPage(number=p.number, blocks=p.blocks) for p in parse(path, Kind.PDF)]
    expected = chunk_pages(
        parsed, target_tokens=int(settings.CHUNK_TARGET_TOKENS), max_tokens=int(settings.CHUNK_MAX_TOKENS)
    )
    stored = Chunk.objects.filter(version=version).order_by("ordinal")
    assert [(c.text, c.page_start, c.page_end) for c in stored] == [
        (c.text, c.page_start, c.page_end) for c in expected
    ]
