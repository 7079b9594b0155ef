"""Limits on what one document may expand to, each ending in its own cause (docs/limits.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines.limits import ParseLimits
from documents.engines.parsing import parse, render_pdf_page
from documents.engines.sniff import Kind
from documents.engines.validation import UploadRejected, validate_upload
from documents.parsers.word import DocxLimits
from jobs.errors import StageFailure, get_cause
from jobs.models import Status
from tests.documents import files
from tests.documents.helpers import make_tenant, run_until_idle, upload
from tests.reliability import corpus


def failure_of(path: Path, kind: Kind, limits: ParseLimits) -> StageFailure:
    with pytest.raises(StageFailure) as caught:
        list(parse(path, kind, limits=limits))
    return caught.value


def test_markup_nested_past_the_limit_is_refused_before_the_html_parser(tmp_path: Path) -> None:
    path = files.save(tmp_path, "deep.html", corpus.nested_html(200_000))
    assert failure_of(path, Kind.HTML, ParseLimits(max_html_depth=25_000)).cause == "nesting_too_deep"


def test_unclosed_paragraphs_and_void_tags_do_not_count_as_depth(tmp_path: Path) -> None:
    html = "<html><body>" + "<p>harbor line<br><img src=x>" * 5_000 + "</body></html>"
    (page,) = parse(
        files.save(tmp_path, "flat.html", html.encode()), Kind.HTML, limits=ParseLimits(max_html_depth=50)
    )
    assert "harbor line" in page.text


def test_a_markdown_line_over_the_limit_is_line_too_long(tmp_path: Path) -> None:
    path = files.save(tmp_path, "long.md", b"# Title\n\n" + b"x" * 2_001 + b"\n")
    assert failure_of(path, Kind.MARKDOWN, ParseLimits(max_line_chars=2_000)).cause == "line_too_long"
    (page,) = parse(path, Kind.MARKDOWN, limits=ParseLimits(max_line_chars=2_001))
    assert page.blocks[0].text == "Title"


def test_text_over_the_limit_is_text_too_long(tmp_path: Path) -> None:
    path = files.save(tmp_path, "notes.txt", b"harbor " * 1_000)
    assert failure_of(path, Kind.TEXT, ParseLimits(max_text_chars=6_999)).cause == "text_too_long"


def test_a_page_too_large_to_render_fails_before_allocating(tmp_path: Path) -> None:
    path = files.save(tmp_path, "poster.pdf", corpus.huge_page_pdf())
    with pytest.raises(StageFailure) as caught:
        render_pdf_page(path, 1, dpi=200, max_pixels=100_000_000)
    assert caught.value.cause == "page_too_large"
    assert render_pdf_page(path, 1, dpi=10, max_pixels=100_000_000).size == (2000, 2000)


def test_a_docx_with_an_oversized_xml_part_is_refused_at_upload() -> None:
    data = corpus.docx_huge_document_part(megabytes=3)
    with pytest.raises(UploadRejected) as refused:
        validate_upload(
            data,
            filename="ledger.docx",
            max_bytes=50 * 2**20,
            docx_limits=DocxLimits(max_xml_member_bytes=2 * 2**20),
        )
    assert refused.value.code == "docx_bomb"
    assert validate_upload(data, filename="ledger.docx", max_bytes=50 * 2**20).kind is Kind.DOCX


@pytest.mark.django_db(transaction=True)
def test_pages_over_the_limit_fail_the_job_as_too_many_pages(
    settings: DjangoSettings, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    settings.DOCUMENTS_MAX_PAGES = 2
    result = upload(make_tenant(), files.text_pdf(["One.", "Two.", "Three."]), "three.pdf")
    assert result.job is not None
    job = run_until_idle(result.job.pk)
    assert (job.status, job.error_code, job.stage) == (Status.FAILED, "too_many_pages", "parsing")
    assert job.error_message == get_cause("too_many_pages").user_message


@pytest.mark.django_db(transaction=True)
def test_chunks_over_the_limit_fail_the_job_as_too_many_chunks(
    settings: DjangoSettings, tmp_path: Path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    settings.DOCUMENTS_MAX_CHUNKS = 2
    text = "\n\n".join(f"# Part {n}\n\nHarbor section {n}." for n in range(5))
    result = upload(make_tenant(), text.encode(), "parts.md")
    assert result.job is not None
    job = run_until_idle(result.job.pk)
    assert (job.status, job.error_code, job.stage) == (Status.FAILED, "too_many_chunks", "chunking")
