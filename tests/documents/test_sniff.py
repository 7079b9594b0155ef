"""Type sniffing decides by content; a name can only tip unstructured text towards Markdown."""

from __future__ import annotations

import random

import filetype
import pytest

from documents.engines.sniff import Kind, sniff
from documents.parsers import UploadCheckFailed
from documents.parsers.content import decode_text
from documents.parsers.markup import text_kind
from tests.documents import files


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param(files.text_pdf(), Kind.PDF, id="pdf"),
        pytest.param(files.docx_document(), Kind.DOCX, id="docx"),
        pytest.param(files.HTML_PAGE.encode(), Kind.HTML, id="html"),
        pytest.param(files.MARKDOWN_DOC.encode(), Kind.MARKDOWN, id="markdown"),
        pytest.param(files.ENGLISH_TEXT.encode(), Kind.TEXT, id="text"),
        pytest.param(files.png(), Kind.PNG, id="png"),
        pytest.param(files.jpeg(), Kind.JPEG, id="jpeg"),
        pytest.param(files.multipage_tiff(), Kind.TIFF, id="tiff"),
    ],
)
def test_each_supported_type_is_recognised_by_content(data: bytes, kind: Kind) -> None:
    sniffed = sniff(data, filename="upload.bin")
    assert sniffed is not None
    assert sniffed.kind is kind


def test_pdf_named_docx_is_sniffed_as_pdf() -> None:
    sniffed = sniff(files.text_pdf(), filename="report.docx")
    assert sniffed is not None
    assert sniffed.kind is Kind.PDF


def test_html_named_pdf_is_sniffed_as_html() -> None:
    sniffed = sniff(files.HTML_PAGE.encode(), filename="report.pdf")
    assert sniffed is not None
    assert sniffed.kind is Kind.HTML


def test_docx_whose_first_zip_entry_is_not_content_types_is_still_docx() -> None:
    data = files.docx_reordered()
    assert filetype.guess(data).mime == "application/zip"  # the case filetype alone gets wrong
    sniffed = sniff(data)
    assert sniffed is not None
    assert sniffed.kind is Kind.DOCX


def test_zip_of_other_files_named_docx_is_unsupported() -> None:
    assert sniff(files.zip_of_other_files(), filename="contract.docx") is None


def test_random_binary_is_unsupported_whatever_its_name() -> None:
    junk = random.Random(7).randbytes(4096)
    assert sniff(junk, filename="notes.txt") is None
    assert sniff(junk, filename="notes.md") is None


def test_other_binary_format_is_unsupported() -> None:
    gzip_member = b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4
    assert sniff(gzip_member, filename="archive.txt") is None


def test_empty_content_is_unsupported() -> None:
    assert sniff(b"", filename="empty.txt") is None


def test_text_starting_with_bmp_signature_is_text() -> None:
    # filetype calls anything starting with "BM" a bitmap; only accepted formats' magic is trusted.
    data = b"BMW and Audi sales figures for the quarter.\n"
    assert filetype.guess(data).extension == "bmp"
    sniffed = sniff(data, filename="cars.txt")
    assert sniffed is not None
    assert sniffed.kind is Kind.TEXT


def test_zip_with_too_many_entries_is_refused_before_listing() -> None:
    with pytest.raises(UploadCheckFailed) as refused:
        sniff(files.docx_many_entries(5_001))
    assert refused.value.code == "docx_bomb"


def test_zip_just_within_the_entry_limit_is_listed() -> None:
    sniffed = sniff(files.docx_many_entries(5_000))
    assert sniffed is not None
    assert sniffed.kind is Kind.DOCX


# --- encodings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "codec", "encoding"),
    [
        pytest.param(files.ENGLISH_TEXT, "utf-8", "utf-8", id="utf-8"),
        pytest.param(files.CHINESE_TEXT, "utf-8-sig", "utf-8-sig", id="utf-8-bom"),
        pytest.param(files.CHINESE_TEXT, "utf-16", "utf-16", id="utf-16-bom"),
        pytest.param(files.ENGLISH_TEXT, "utf-16-le", "utf-16-le", id="utf-16-le-no-bom"),
        pytest.param(files.ENGLISH_TEXT, "utf-16-be", "utf-16-be", id="utf-16-be-no-bom"),
        pytest.param(files.CHINESE_TEXT, "gb18030", "gb18030", id="gb18030"),
        pytest.param("中文", "gb18030", "gb18030", id="gb18030-short"),
    ],
)
def test_text_decodes_exactly_and_reports_its_encoding(text: str, codec: str, encoding: str) -> None:
    data = text.encode(codec)
    decoded = decode_text(data)
    assert decoded is not None
    assert decoded.text == text
    assert decoded.encoding == encoding
    sniffed = sniff(data, filename="notes.txt")
    assert sniffed is not None
    assert (sniffed.kind, sniffed.encoding) == (Kind.TEXT, encoding)


def test_text_in_an_unsupported_legacy_encoding_is_rejected() -> None:
    assert decode_text("Café crème brûlée, voilà".encode("latin-1")) is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(bytes(random.Random(3).randrange(1, 128) for _ in range(2000)), id="ascii-range-binary"),
        pytest.param(("中文\x01\x02\x03\x1b" * 100).encode("gb18030"), id="gb18030-with-controls"),
    ],
)
def test_bytes_that_decode_but_are_full_of_control_characters_are_not_text(data: bytes) -> None:
    assert decode_text(data) is None
    assert sniff(data, filename="notes.txt") is None


# --- HTML, Markdown or text --------------------------------------------------------------------


def test_markdown_content_named_txt_is_markdown() -> None:
    assert text_kind(files.MARKDOWN_DOC, filename="notes.txt") is Kind.MARKDOWN


def test_plain_prose_named_md_is_markdown_by_tie_break() -> None:
    assert text_kind("Just a sentence.\n\nAnd another one.", filename="notes.md") is Kind.MARKDOWN


def test_plain_prose_named_txt_is_text() -> None:
    assert text_kind("Just a sentence.\n\nAnd another one.", filename="notes.txt") is Kind.TEXT


def test_a_single_weak_markdown_sign_does_not_make_markdown() -> None:
    assert text_kind("Shopping:\n- apples and pears\n", filename="list.txt") is Kind.TEXT


def test_markdown_name_cannot_make_html_into_markdown() -> None:
    assert text_kind(files.HTML_PAGE, filename="page.md") is Kind.HTML


def test_html_fragment_is_html() -> None:
    assert text_kind("<p>Hello <b>there</b></p>\n<p>Second</p>") is Kind.HTML


def test_html_after_xml_declaration_and_comment_is_html() -> None:
    page = '<?xml version="1.0"?>\n<!-- generated -->\n<html><body><p>x</p></body></html>'
    assert text_kind(page) is Kind.HTML


def test_markdown_readme_opening_with_an_html_block_is_markdown() -> None:
    readme = '<p align="center"><img src="logo.png"></p>\n\n# Project\n\nSee [docs](https://x.org).\n'
    assert text_kind(readme, filename="README") is Kind.MARKDOWN


def test_text_mentioning_a_tag_later_is_text() -> None:
    assert text_kind("Use the <html> element at the top of a page.", filename="tip.txt") is Kind.TEXT
