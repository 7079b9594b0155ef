"""PDF parsing: page by page, resumable, with scanned pages marked for OCR and failures classified."""

from __future__ import annotations

from pathlib import Path

import pytest

from documents.engines.parsing import (
    ParsedPage,
    page_count,
    parse,
    parse_document,
    pdf_page_count,
    render_pdf_page,
)
from documents.engines.sniff import Kind
from jobs.errors import StageFailure
from tests.documents import files


def pdf(tmp_path: Path, data: bytes) -> Path:
    return files.save(tmp_path, "document.pdf", data)


def failure(path: Path) -> StageFailure:
    with pytest.raises(StageFailure) as caught:
        list(parse(path, Kind.PDF))
    return caught.value


def test_text_pdf_yields_every_page_with_its_own_phrase(tmp_path: Path) -> None:
    pages = list(parse(pdf(tmp_path, files.text_pdf()), Kind.PDF))
    assert [page.number for page in pages] == [1, 2, 3]
    assert [page.text for page in pages] == list(files.PAGE_PHRASES)
    assert not any(page.needs_ocr for page in pages)
    assert pages[0].blocks[0].kind == "paragraph"


def test_page_count_is_the_number_of_pages(tmp_path: Path) -> None:
    path = pdf(tmp_path, files.text_pdf())
    assert page_count(path, Kind.PDF) == pdf_page_count(path) == 3


def test_parse_resumes_after_the_checkpointed_page(tmp_path: Path) -> None:
    path = pdf(tmp_path, files.text_pdf())
    pages = list(parse(path, Kind.PDF, start_page=1))
    assert [page.number for page in pages] == [2, 3]
    assert pages[0].text == files.PAGE_PHRASES[1]


def test_parse_from_the_last_page_yields_nothing(tmp_path: Path) -> None:
    assert list(parse(pdf(tmp_path, files.text_pdf()), Kind.PDF, start_page=3)) == []


def test_negative_start_page_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="start_page"):
        next(parse(pdf(tmp_path, files.text_pdf()), Kind.PDF, start_page=-1))


def test_scanned_page_needs_ocr_and_text_pages_do_not(tmp_path: Path) -> None:
    pages = list(parse(pdf(tmp_path, files.scanned_pdf()), Kind.PDF))
    assert [page.needs_ocr for page in pages] == [False, True, False]
    assert pages[1] == ParsedPage(2, "", needs_ocr=True)
    assert pages[2].text == files.PAGE_PHRASES[2]


def test_scanned_page_renders_as_grayscale_with_ink(tmp_path: Path) -> None:
    image = render_pdf_page(pdf(tmp_path, files.scanned_pdf()), 2, dpi=100)
    assert image.mode == "L"
    assert image.size == (827, 1170)  # A4 at 100 dpi
    darkest, lightest = image.getextrema()
    assert (darkest, lightest) == (0, 255)


def test_render_resolution_follows_dpi(tmp_path: Path) -> None:
    image = render_pdf_page(pdf(tmp_path, files.text_pdf()), 1)
    assert image.size == (1654, 2339)  # A4 at the default 200 dpi


def test_render_of_a_page_outside_the_document_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside"):
        render_pdf_page(pdf(tmp_path, files.text_pdf()), 4)


def test_chinese_text_layer_is_extracted(tmp_path: Path) -> None:
    pages = list(parse(pdf(tmp_path, files.chinese_text_pdf()), Kind.PDF))
    assert [page.text for page in pages] == list(files.CHINESE_PAGE_PHRASES)


def test_chinese_scanned_page_needs_ocr_and_renders_with_ink(tmp_path: Path) -> None:
    path = pdf(tmp_path, files.chinese_scanned_pdf())
    assert list(parse(path, Kind.PDF)) == [ParsedPage(1, "", needs_ocr=True)]
    assert render_pdf_page(path, 1, dpi=100).getextrema() == (0, 255)


def test_title_comes_from_the_metadata(tmp_path: Path) -> None:
    document = parse_document(pdf(tmp_path, files.text_pdf(title="Harbor Survey")), Kind.PDF)
    assert document.title == "Harbor Survey"
    assert len(document.pages) == 3


def test_encrypted_pdf_fails_with_encrypted_input(tmp_path: Path) -> None:
    path = pdf(tmp_path, files.encrypted_pdf())
    assert failure(path).cause == "encrypted_input"
    with pytest.raises(StageFailure) as caught:
        page_count(path, Kind.PDF)
    assert caught.value.cause == "encrypted_input"


def test_owner_password_only_pdf_is_read(tmp_path: Path) -> None:
    pages = list(parse(pdf(tmp_path, files.owner_password_pdf()), Kind.PDF))
    assert [page.text for page in pages] == [files.PAGE_PHRASES[0]]


@pytest.mark.parametrize("fraction", [0.9, 0.5, 0.1])
def test_truncated_pdf_fails_with_corrupt_input(tmp_path: Path, fraction: float) -> None:
    assert failure(pdf(tmp_path, files.truncated(files.text_pdf(), fraction))).cause == "corrupt_input"


def test_bit_flipped_pdf_fails_with_corrupt_input(tmp_path: Path) -> None:
    assert failure(pdf(tmp_path, files.bit_flipped(files.text_pdf()))).cause == "corrupt_input"


def test_damaged_page_fails_with_corrupt_input_after_the_readable_pages(tmp_path: Path) -> None:
    data = files.text_pdf()
    third_page = files.page_object_numbers(data)[2]
    pages = parse(pdf(tmp_path, files.damage_pdf_object(data, third_page)), Kind.PDF)
    assert [next(pages).text, next(pages).text] == list(files.PAGE_PHRASES[:2])
    with pytest.raises(StageFailure) as caught:
        next(pages)
    assert caught.value.cause == "corrupt_input"
    assert "page 3" in caught.value.detail


def test_zero_page_pdf_fails_with_empty_input(tmp_path: Path) -> None:
    path = pdf(tmp_path, files.zero_page_pdf())
    assert failure(path).cause == "empty_input"
    with pytest.raises(StageFailure) as caught:
        pdf_page_count(path)
    assert caught.value.cause == "empty_input"


def test_zero_page_pdf_is_empty_input_even_right_after_an_encrypted_pdf(tmp_path: Path) -> None:
    # PDFium keeps its last error code across documents; a stale "password" must not leak into
    # the verdict on the next document.
    assert failure(files.save(tmp_path, "locked.pdf", files.encrypted_pdf())).cause == "encrypted_input"
    assert failure(files.save(tmp_path, "empty.pdf", files.zero_page_pdf())).cause == "empty_input"


def test_html_given_as_pdf_fails_with_corrupt_input(tmp_path: Path) -> None:
    assert failure(pdf(tmp_path, files.HTML_PAGE.encode())).cause == "corrupt_input"


def test_blank_pages_are_empty_not_sent_to_ocr(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(50):
        pdf.add_page()
    path = tmp_path / "blank.pdf"
    path.write_bytes(bytes(pdf.output()))
    pages = list(parse(path, Kind.PDF))
    assert len(pages) == 50
    assert not any(page.needs_ocr for page in pages)
    assert all(page.text == "" for page in pages)
