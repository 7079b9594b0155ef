"""HTML, Markdown and plain-text parsing into structure blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from documents.engines.parsing import Block, ParsedPage, page_count, parse, parse_document
from documents.engines.sniff import Kind
from jobs.errors import StageFailure
from tests.documents import files


def only_page(tmp_path: Path, data: bytes, kind: Kind) -> ParsedPage:
    (page,) = parse(files.save(tmp_path, "upload", data), kind)
    return page


def failure(tmp_path: Path, data: bytes, kind: Kind) -> StageFailure:
    with pytest.raises(StageFailure) as caught:
        list(parse(files.save(tmp_path, "upload", data), kind))
    return caught.value


# --- HTML --------------------------------------------------------------------------------------


def test_html_keeps_headings_paragraphs_lists_tables_and_pre_in_order(tmp_path: Path) -> None:
    page = only_page(tmp_path, files.HTML_PAGE.encode(), Kind.HTML)
    assert list(page.blocks) == [
        Block("heading", "Harbor Report", 1),
        Block("paragraph", "The boats left at dawn.\nThey returned at dusk."),
        Block("paragraph", "Loose text in a div with a link"),
        Block("heading", "Catch", 2),
        Block("list", "Cod", 1),
        Block("list", "Atlantic cod", 2),
        Block("list", "Herring", 1),
        Block("table", "Fish | Tons\nCod | 12"),
        Block("code", "  line one\n  line two"),
        Block("paragraph", "港口的渔船已经出发。"),
    ]


@pytest.mark.parametrize("marker", ["SCRIPT_MARKER", "NOSCRIPT_MARKER", "TEMPLATE_MARKER", "color: red"])
def test_html_drops_scripts_styles_noscript_and_templates(tmp_path: Path, marker: str) -> None:
    assert marker not in only_page(tmp_path, files.HTML_PAGE.encode(), Kind.HTML).text


def test_html_title_is_the_document_title(tmp_path: Path) -> None:
    path = files.save(tmp_path, "page.html", files.HTML_PAGE.encode())
    assert parse_document(path, Kind.HTML).title == "Harbor Report"


def test_html_in_gb18030_is_decoded(tmp_path: Path) -> None:
    page = only_page(tmp_path, files.HTML_PAGE.encode("gb18030"), Kind.HTML)
    assert page.blocks[-1] == Block("paragraph", "港口的渔船已经出发。")


def test_html_with_only_scripts_fails_with_empty_input(tmp_path: Path) -> None:
    html = b"<html><head><title>Empty</title><script>var a = 1;</script></head><body> </body></html>"
    assert failure(tmp_path, html, Kind.HTML).cause == "empty_input"


def test_deeply_nested_html_does_not_exhaust_the_stack(tmp_path: Path) -> None:
    depth = 5_000  # far beyond Python's recursion limit
    html = ("<div>" * depth + "<p>deep text</p>" + "</div>" * depth).encode()
    assert only_page(tmp_path, html, Kind.HTML).blocks == (Block("paragraph", "deep text"),)


def test_nested_table_rows_are_read_once_as_text_of_their_cell(tmp_path: Path) -> None:
    html = (
        b"<table><tr><td>outer</td><td><table><tr><td>in 1</td><td>in 2</td></tr></table></td></tr></table>"
    )
    assert only_page(tmp_path, html, Kind.HTML).blocks == (Block("table", "outer | in 1 in 2"),)


# --- Markdown ----------------------------------------------------------------------------------


def test_markdown_structure_becomes_blocks(tmp_path: Path) -> None:
    page = only_page(tmp_path, files.MARKDOWN_DOC.encode(), Kind.MARKDOWN)
    assert list(page.blocks) == [
        Block("heading", "Field Notes", 1),
        Block("paragraph", "The survey started on Monday with a map.\nIt continued for a week."),
        Block("heading", "Findings", 2),
        Block("list", "Birds nested early", 1),
        Block("list", "Mostly swallows", 2),
        Block("list", "Water levels rose", 1),
        Block("list", "First measure", 1),
        Block("list", "Second measure", 1),
        Block("table", "Site | Count\nA | 12\nB | 7"),
        Block("code", 'print("code stays as written")'),
        Block("paragraph", "Quoted remark from the guide."),
        Block("heading", "Setext Heading", 2),
        Block("paragraph", "最后一段是中文。"),
    ]


def test_markdown_front_matter_is_not_content(tmp_path: Path) -> None:
    assert "title: Field notes" not in only_page(tmp_path, files.MARKDOWN_DOC.encode(), Kind.MARKDOWN).text


def test_markdown_code_keeps_its_indentation_and_markup(tmp_path: Path) -> None:
    markdown = b"~~~\n  # not a heading\n  - not a list\n~~~\n"
    assert only_page(tmp_path, markdown, Kind.MARKDOWN).blocks == (
        Block("code", "  # not a heading\n  - not a list"),
    )


def test_markdown_unclosed_fence_runs_to_the_end(tmp_path: Path) -> None:
    page = only_page(tmp_path, b"Intro\n\n```\nlast lines\nof code", Kind.MARKDOWN)
    assert page.blocks == (Block("paragraph", "Intro"), Block("code", "last lines\nof code"))


def test_markdown_with_only_front_matter_fails_with_empty_input(tmp_path: Path) -> None:
    assert failure(tmp_path, b"---\ntitle: x\n---\n\n   \n", Kind.MARKDOWN).cause == "empty_input"


# --- plain text --------------------------------------------------------------------------------


def test_text_paragraphs_split_on_blank_lines(tmp_path: Path) -> None:
    page = only_page(tmp_path, files.ENGLISH_TEXT.encode(), Kind.TEXT)
    assert list(page.blocks) == [
        Block("paragraph", "Plain notes from the harbor.\nThe tide was high."),
        Block("paragraph", "Second paragraph, after a blank line."),
        Block("paragraph", "Third paragraph."),
    ]


@pytest.mark.parametrize("codec", ["utf-8", "utf-8-sig", "utf-16", "gb18030"])
def test_chinese_text_reads_the_same_in_every_supported_encoding(tmp_path: Path, codec: str) -> None:
    page = only_page(tmp_path, files.CHINESE_TEXT.encode(codec), Kind.TEXT)
    assert page.text == "港口笔记。\n潮水很高。\n\n第二段。渔船在黎明出发。黄昏返回。"
    assert len(page.blocks) == 2


def test_english_utf16_without_byte_order_mark_is_read(tmp_path: Path) -> None:
    page = only_page(tmp_path, files.ENGLISH_TEXT.encode("utf-16-le"), Kind.TEXT)
    assert page.blocks[-1] == Block("paragraph", "Third paragraph.")


def test_windows_line_endings_are_normalised(tmp_path: Path) -> None:
    page = only_page(tmp_path, b"one\r\ntwo\r\n\r\nthree", Kind.TEXT)
    assert page.blocks == (Block("paragraph", "one\ntwo"), Block("paragraph", "three"))


def test_whitespace_only_text_fails_with_empty_input(tmp_path: Path) -> None:
    assert failure(tmp_path, b" \n\t\r\n  \n", Kind.TEXT).cause == "empty_input"


def test_undecodable_text_fails_with_corrupt_input(tmp_path: Path) -> None:
    assert failure(tmp_path, files.one_pixel_png(), Kind.TEXT).cause == "corrupt_input"


def test_text_is_one_page_without_a_title(tmp_path: Path) -> None:
    path = files.save(tmp_path, "notes.txt", files.ENGLISH_TEXT.encode())
    assert page_count(path, Kind.TEXT) == 1
    document = parse_document(path, Kind.TEXT)
    assert (document.kind, document.title, len(document.pages)) == (Kind.TEXT, None, 1)
