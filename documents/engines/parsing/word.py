"""DOCX: headings, paragraphs, lists and tables in document order (python-docx)."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph

from documents.causes import CORRUPT_INPUT, EMPTY_INPUT, ENCRYPTED_INPUT, UNSUPPORTED_INPUT
from documents.engines.parsing.blocks import Block, ParsedDocument, ParsedPage, StrPath
from documents.engines.sniff import Kind
from documents.engines.validation import ArchiveProblem, DocxArchiveRejected, check_docx_archive
from jobs.errors import StageFailure

_DOCX_CAUSES = {
    ArchiveProblem.NOT_A_ZIP: CORRUPT_INPUT.code,
    ArchiveProblem.NOT_DOCX: UNSUPPORTED_INPUT.code,
    ArchiveProblem.TOO_MANY_ENTRIES: UNSUPPORTED_INPUT.code,
    ArchiveProblem.TOO_LARGE: UNSUPPORTED_INPUT.code,
    ArchiveProblem.ENCRYPTED: ENCRYPTED_INPUT.code,
}
# What python-docx raises on damaged packages (lxml's XMLSyntaxError is a SyntaxError).
_DOCX_ERRORS = (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, SyntaxError)
_DOCX_HEADING_STYLE = re.compile(r"Heading ([1-9])$")


def parse_docx(path: StrPath) -> ParsedDocument:
    """A DOCX as one page of blocks, tables included. The zip pre-check runs before python-docx."""
    data = Path(path).read_bytes()
    try:
        check_docx_archive(data)
    except DocxArchiveRejected as exc:
        raise StageFailure(_DOCX_CAUSES[exc.problem], f"DOCX pre-check: {exc.detail}") from exc
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document.iter_inner_content()))
        title = (document.core_properties.title or "").strip() or None
    except _DOCX_ERRORS as exc:
        raise StageFailure(
            CORRUPT_INPUT.code, f"DOCX could not be read: {type(exc).__name__}: {exc}"
        ) from exc
    if not blocks:
        raise StageFailure(EMPTY_INPUT.code, "DOCX has no text")
    return ParsedDocument(Kind.DOCX, title, [ParsedPage.from_blocks(1, blocks)])


def _docx_blocks(items: Iterator[Paragraph | Table]) -> Iterator[Block]:
    for item in items:
        if isinstance(item, Paragraph):
            block = _docx_paragraph(item)
            if block is not None:
                yield block
        else:
            rows = _docx_table_rows(item)
            if rows:
                yield Block("table", "\n".join(rows))


def _docx_paragraph(paragraph: Paragraph) -> Block | None:
    text = paragraph.text.strip()
    if not text:
        return None
    style = (paragraph.style.name if paragraph.style is not None else None) or ""
    if style == "Title":
        return Block("heading", text, 1)
    if heading := _DOCX_HEADING_STYLE.match(style):
        return Block("heading", text, int(heading.group(1)))
    if style.startswith("List"):  # "List Bullet 2" is a second-level item
        depth = style.rsplit(" ", 1)[-1]
        return Block("list", text, int(depth) if depth.isdigit() else 1)
    return Block("paragraph", text)


def _docx_table_rows(table: Table) -> list[str]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        previous: _Cell | None = None
        for cell in row.cells:
            # A cell spanning several grid columns is returned once per column (the same object).
            if cell is not previous:
                cells.append(_docx_cell_text(cell))
            previous = cell
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


def _docx_cell_text(cell: _Cell) -> str:
    parts = []
    for item in cell.iter_inner_content():
        if isinstance(item, Paragraph):
            parts.append(item.text.strip())
        else:
            parts.append("; ".join(_docx_table_rows(item)))  # a nested table, flattened into its cell
    return " ".join(part for part in parts if part)
