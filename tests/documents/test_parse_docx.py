"""DOCX parsing: structure and tables kept, bombs stopped before python-docx, failures classified."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from documents.engines.parsing import Block, page_count, parse, parse_document
from documents.engines.sniff import Kind
from jobs.errors import StageFailure
from tests.documents import files


def docx(tmp_path: Path, data: bytes) -> Path:
    return files.save(tmp_path, "document.docx", data)


def failure(path: Path) -> StageFailure:
    with pytest.raises(StageFailure) as caught:
        list(parse(path, Kind.DOCX))
    return caught.value


EXPECTED_BLOCKS = [
    Block("heading", "Quarterly Report", 1),
    Block("heading", "Summary", 1),
    Block("paragraph", "Revenue grew in the north and fell slightly in the south."),
    Block("list", "First finding", 1),
    Block("list", "Nested finding", 2),
    Block("heading", "Details", 2),
    Block("paragraph", "收入在北方增长。"),
    Block("table", "Region | Revenue | Growth\nNorth | 120 | 5%\nSouth | 98 | -2%"),
    Block("paragraph", "Closing remarks after the table."),
]


def test_headings_paragraphs_lists_and_tables_are_blocks_in_document_order(tmp_path: Path) -> None:
    (page,) = parse(docx(tmp_path, files.docx_document()), Kind.DOCX)
    assert page.number == 1
    assert not page.needs_ocr
    assert list(page.blocks) == EXPECTED_BLOCKS
    assert page.text == "\n\n".join(block.text for block in EXPECTED_BLOCKS)


def test_title_comes_from_the_core_properties(tmp_path: Path) -> None:
    assert parse_document(docx(tmp_path, files.docx_document()), Kind.DOCX).title == "Quarterly Report"


def test_merged_cells_appear_once_and_nested_tables_are_read(tmp_path: Path) -> None:
    (page,) = parse(docx(tmp_path, files.docx_with_merged_cells()), Kind.DOCX)
    assert list(page.blocks) == [Block("table", "Spanning header\nLeft | inner A | inner B")]


def test_docx_with_reordered_zip_entries_parses_the_same(tmp_path: Path) -> None:
    (page,) = parse(docx(tmp_path, files.docx_reordered()), Kind.DOCX)
    assert list(page.blocks) == EXPECTED_BLOCKS


def test_docx_is_one_page_and_resuming_past_it_yields_nothing(tmp_path: Path) -> None:
    path = docx(tmp_path, files.docx_document())
    assert page_count(path, Kind.DOCX) == 1
    assert list(parse(path, Kind.DOCX, start_page=1)) == []


# Builders, not bytes: a bomb would otherwise be built at collection, in every worker.
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: files.docx_bomb(200), id="member-over-100mb"),
        pytest.param(lambda: files.docx_bomb(20), id="ratio-over-200"),
        pytest.param(lambda: files.docx_many_entries(5_001), id="too-many-entries"),
    ],
)
def test_docx_bomb_fails_with_unsupported_input_before_python_docx_reads_it(
    tmp_path: Path, build: Callable[[], bytes]
) -> None:
    stage_failure = failure(docx(tmp_path, build()))
    assert stage_failure.cause == "unsupported_input"
    assert stage_failure.detail.startswith("DOCX pre-check")


def test_docx_with_an_encrypted_part_fails_with_encrypted_input(tmp_path: Path) -> None:
    assert failure(docx(tmp_path, files.docx_with_encrypted_member())).cause == "encrypted_input"


def test_zip_of_other_files_fails_with_unsupported_input(tmp_path: Path) -> None:
    assert failure(docx(tmp_path, files.zip_of_other_files())).cause == "unsupported_input"


def test_truncated_docx_fails_with_corrupt_input(tmp_path: Path) -> None:
    assert failure(docx(tmp_path, files.truncated(files.docx_document()))).cause == "corrupt_input"


def test_docx_with_malformed_xml_fails_with_corrupt_input(tmp_path: Path) -> None:
    stage_failure = failure(docx(tmp_path, files.docx_with_broken_xml()))
    assert stage_failure.cause == "corrupt_input"
    assert "XMLSyntaxError" in stage_failure.detail


def test_docx_without_text_fails_with_empty_input(tmp_path: Path) -> None:
    assert failure(docx(tmp_path, files.empty_docx())).cause == "empty_input"
