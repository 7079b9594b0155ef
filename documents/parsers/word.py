"""DOCX: headings, paragraphs, lists and tables in document order (python-docx), recognised by its
zip member list and checked for decompression bombs before python-docx opens it."""

from __future__ import annotations

import enum
import io
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from documents.causes import CORRUPT_INPUT, EMPTY_INPUT, ENCRYPTED_INPUT, UNSUPPORTED_INPUT
from documents.engines.limits import ParseLimits
from documents.parsers import FileKind, Kind, Parser, UploadCheckFailed
from documents.parsers.content import ZipDirectoryTooLarge, read_zip_directory
from documents.parsers.pages import Block, ParsedDocument, ParsedPage, StrPath
from jobs.errors import StageFailure

if TYPE_CHECKING:
    from docx.table import Table, _Cell
    from docx.text.paragraph import Paragraph

MB = 1024 * 1024
DOCX_REQUIRED_MEMBERS = frozenset({"[Content_Types].xml", "word/document.xml"})
ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06")

# --- the zip pre-check -----------------------------------------------------------------------------


class ArchiveProblem(enum.StrEnum):
    """What the DOCX zip pre-check found wrong."""

    NOT_A_ZIP = "not_a_zip"
    NOT_DOCX = "not_docx"
    TOO_MANY_ENTRIES = "too_many_entries"
    TOO_LARGE = "too_large"
    ENCRYPTED = "encrypted"


class DocxArchiveRejected(ValueError):
    """The zip pre-check refused a DOCX; ``detail`` says why, for operators."""

    def __init__(self, problem: ArchiveProblem, detail: str) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail


@dataclass(frozen=True, slots=True)
class DocxLimits:
    """What a DOCX may expand to. python-docx holds every part in memory: a 2.1 MB file expanding to
    2 GiB exhausted memory, and the zip directory is the only cheap place to stop it."""

    max_member_bytes: int = 100 * MB
    max_total_bytes: int = 300 * MB
    max_ratio: float = 200
    # Small members compress absurdly well (a page of spaces) yet cannot exhaust memory.
    ratio_floor_bytes: int = MB
    # XML parts are parsed into trees (about 17x their size in memory): a 95 MB document.xml
    # inside a 12.6 MB DOCX passed the limits above and parsed for over 10 minutes at 1.6 GB.
    # Media parts (images) are only copied, so they keep the larger member limit.
    max_xml_member_bytes: int = 25 * MB


DOCX_LIMITS = DocxLimits()
# General purpose bit 0 of a zip entry: the member is encrypted.
_ENCRYPTED_FLAG = 0x1


def check_docx_archive(data: bytes, *, limits: DocxLimits = DOCX_LIMITS) -> None:
    """Refuse a DOCX whose zip directory shows a bomb, encryption or missing parts.

    Reads only the directory. Its sizes can be trusted because zipfile (which python-docx uses)
    stops at a member's declared size and fails the CRC check if the data goes on.
    Raises :class:`DocxArchiveRejected`.
    """
    try:
        members = read_zip_directory(data)
    except ZipDirectoryTooLarge as exc:
        raise DocxArchiveRejected(ArchiveProblem.TOO_MANY_ENTRIES, str(exc)) from exc
    if members is None:
        raise DocxArchiveRejected(ArchiveProblem.NOT_A_ZIP, "not a readable zip archive")
    missing = DOCX_REQUIRED_MEMBERS - {member.filename for member in members}
    if missing:
        raise DocxArchiveRejected(ArchiveProblem.NOT_DOCX, f"zip lacks {sorted(missing)}")
    encrypted = [member.filename for member in members if member.flag_bits & _ENCRYPTED_FLAG]
    if encrypted:
        raise DocxArchiveRejected(ArchiveProblem.ENCRYPTED, f"encrypted members: {encrypted[:5]}")
    total = 0
    for member in members:
        size, packed = member.file_size, max(member.compress_size, 1)
        xml = member.filename.endswith((".xml", ".rels"))
        if size > limits.max_member_bytes or (xml and size > limits.max_xml_member_bytes):
            raise DocxArchiveRejected(
                ArchiveProblem.TOO_LARGE, f"{member.filename!r} expands to {size} bytes"
            )
        if size > limits.ratio_floor_bytes and size > limits.max_ratio * packed:
            raise DocxArchiveRejected(
                ArchiveProblem.TOO_LARGE,
                f"{member.filename!r} expands {size / packed:.0f}x ({packed} -> {size} bytes)",
            )
        total += size
    if total > limits.max_total_bytes:
        raise DocxArchiveRejected(ArchiveProblem.TOO_LARGE, f"members expand to {total} bytes in total")


def is_docx_archive(data: bytes) -> bool:
    """Whether the zip ``data`` has the members every DOCX has (its size limits are not checked).

    Raises :class:`ZipDirectoryTooLarge` for a directory too large to list safely.
    """
    members = read_zip_directory(data)
    return members is not None and {member.filename for member in members} >= DOCX_REQUIRED_MEMBERS


# --- parsing -----------------------------------------------------------------------------------

_DOCX_CAUSES = {
    ArchiveProblem.NOT_A_ZIP: CORRUPT_INPUT.code,
    ArchiveProblem.NOT_DOCX: UNSUPPORTED_INPUT.code,
    ArchiveProblem.TOO_MANY_ENTRIES: UNSUPPORTED_INPUT.code,
    ArchiveProblem.TOO_LARGE: UNSUPPORTED_INPUT.code,
    ArchiveProblem.ENCRYPTED: ENCRYPTED_INPUT.code,
}


def _docx_errors() -> tuple[type[BaseException], ...]:
    """What python-docx raises on damaged packages (lxml's XMLSyntaxError is a SyntaxError)."""
    from docx.opc.exceptions import PackageNotFoundError

    return (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, SyntaxError)


_DOCX_HEADING_STYLE = re.compile(r"Heading ([1-9])$")


def parse_docx(path: StrPath) -> ParsedDocument:
    """A DOCX as one page of blocks, tables included. The zip pre-check runs before python-docx."""
    data = Path(path).read_bytes()
    try:
        check_docx_archive(data)
    except DocxArchiveRejected as exc:
        raise StageFailure(_DOCX_CAUSES[exc.problem], f"DOCX pre-check: {exc.detail}") from exc
    import docx  # here, not at the top: a text file's sandbox child need not load lxml

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document.iter_inner_content()))
        title = (document.core_properties.title or "").strip() or None
    except _docx_errors() as exc:
        raise StageFailure(
            CORRUPT_INPUT.code, f"DOCX could not be read: {type(exc).__name__}: {exc}"
        ) from exc
    if not blocks:
        raise StageFailure(EMPTY_INPUT.code, "DOCX has no text")
    return ParsedDocument(Kind.DOCX, title, [ParsedPage.from_blocks(1, blocks)])


def _docx_blocks(items: Iterator[Paragraph | Table]) -> Iterator[Block]:
    from docx.text.paragraph import Paragraph

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
    from docx.text.paragraph import Paragraph

    parts = []
    for item in cell.iter_inner_content():
        if isinstance(item, Paragraph):
            parts.append(item.text.strip())
        else:
            parts.append("; ".join(_docx_table_rows(item)))  # a nested table, flattened into its cell
    return " ".join(part for part in parts if part)


# --- the registered parser ---------------------------------------------------------------------

_DOCX_MESSAGES = {
    ArchiveProblem.TOO_MANY_ENTRIES: "This DOCX file has too many internal parts to open safely.",
    ArchiveProblem.TOO_LARGE: "This DOCX file expands to more data than can be opened safely.",
    ArchiveProblem.ENCRYPTED: (
        "This DOCX file has password-protected parts. Remove the password and upload it again."
    ),
}


def _docx_refusal(problem: ArchiveProblem, detail: str) -> UploadCheckFailed:
    message = _DOCX_MESSAGES.get(problem)
    if message is None:  # not a zip, or a zip without the DOCX parts: simply not a type we take
        return UploadCheckFailed("unsupported_type", None, detail)
    return UploadCheckFailed("docx_bomb", message, f"{problem}: {detail}")


def _sniff(data: bytes) -> str | None:
    try:
        return Kind.DOCX if is_docx_archive(data) else None
    except ZipDirectoryTooLarge as exc:
        raise _docx_refusal(ArchiveProblem.TOO_MANY_ENTRIES, str(exc)) from exc


def _check_upload(content: bytes, limits: Any) -> None:
    try:
        check_docx_archive(content, limits=limits or DOCX_LIMITS)
    except DocxArchiveRejected as exc:
        raise _docx_refusal(exc.problem, exc.detail) from exc


def _document(path: StrPath, limits: ParseLimits) -> ParsedDocument:
    document = parse_docx(path)
    limits.check_text_length(sum(len(page.text) for page in document.pages))
    return document


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    return iter(_document(path, limits).pages[start:])


PARSER = Parser(
    kinds=(
        FileKind(
            Kind.DOCX,
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            (".docx",),
        ),
    ),
    pages=_pages,
    document=lambda path, kind: _document(path, ParseLimits()),
    # filetype only recognises DOCX whose first entry is [Content_Types].xml; the member list
    # is the real test.
    signatures=ZIP_SIGNATURES,
    sniff_binary=_sniff,
    check_upload=_check_upload,
)
