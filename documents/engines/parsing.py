"""Turn a stored upload into pages of text with structure blocks, or fail with a classified cause.

PDFs and images are parsed page by page, so a stage can checkpoint after every page and resume with
``start_page``; the other formats are one page. Headings, paragraphs, list items, tables and code
are kept as :class:`Block` objects so that chunking can follow the document's structure. Failures
raise :class:`jobs.errors.StageFailure` with ``unsupported_input``, ``corrupt_input``,
``encrypted_input`` or ``empty_input``; anything else is a bug or an environment problem and is
left to the engine to classify.
"""

from __future__ import annotations

import io
import os
import re
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import docx
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table, _Cell
from docx.text.paragraph import Paragraph
from PIL import Image, ImageOps
from selectolax.lexbor import LexborHTMLParser, LexborNode

from documents.engines.sniff import Kind, decode_text
from documents.engines.validation import ArchiveProblem, DocxArchiveRejected, check_docx_archive
from jobs.errors import CORRUPT_INPUT, EMPTY_INPUT, ENCRYPTED_INPUT, UNSUPPORTED_INPUT, StageFailure

StrPath = str | os.PathLike[str]
BlockKind = Literal["heading", "paragraph", "table", "list", "code"]


@dataclass(frozen=True, slots=True)
class Block:
    """A structural unit of a page.

    ``level`` is the heading level or list nesting depth (1 = top), 0 for other kinds. A table is
    one block: one line per row, cells joined with `` | ``.
    """

    kind: BlockKind
    text: str
    level: int = 0


@dataclass(frozen=True, slots=True)
class ParsedPage:
    """One page (1-based ``number``). ``needs_ocr`` marks pages with no text layer, such as scans."""

    number: int
    text: str
    needs_ocr: bool
    blocks: tuple[Block, ...] = ()

    @classmethod
    def from_blocks(cls, number: int, blocks: Sequence[Block]) -> ParsedPage:
        return cls(number, "\n\n".join(block.text for block in blocks), needs_ocr=False, blocks=tuple(blocks))


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A whole document: its pages and the title it declares (HTML, DOCX or PDF metadata)."""

    kind: Kind
    title: str | None
    pages: list[ParsedPage]


def parse(path: StrPath, kind: Kind, *, start_page: int = 0) -> Iterator[ParsedPage]:
    """The pages of a document, from page ``start_page + 1`` on.

    A generator: failures (:class:`StageFailure`) surface while iterating, and a caller can save
    ``page.number`` as its checkpoint after each page and pass it back as ``start_page``.
    """
    if start_page < 0:
        raise ValueError(f"start_page must be >= 0, not {start_page}")
    if kind is Kind.PDF:
        yield from iter_pdf_pages(path, start=start_page)
    elif kind.is_image:
        yield from iter_image_pages(path, start=start_page)
    else:
        yield from _parse_single_page(path, kind).pages[start_page:]


def page_count(path: StrPath, kind: Kind) -> int:
    """How many pages :func:`parse` yields from the start: the real total for progress display."""
    if kind is Kind.PDF:
        return pdf_page_count(path)
    if kind.is_image:
        return image_frame_count(path)
    return 1


def parse_document(path: StrPath, kind: Kind) -> ParsedDocument:
    """The whole document with its declared title. Prefer :func:`parse` for long PDFs."""
    if kind is Kind.PDF:
        return ParsedDocument(kind, pdf_title(path), list(iter_pdf_pages(path)))
    if kind.is_image:
        return ParsedDocument(kind, None, list(iter_image_pages(path)))
    return _parse_single_page(path, kind)


def _parse_single_page(path: StrPath, kind: Kind) -> ParsedDocument:
    if kind is Kind.DOCX:
        return parse_docx(path)
    text = _read_text(path)
    title: str | None = None
    if kind is Kind.HTML:
        title, blocks = html_blocks(text)
    elif kind is Kind.MARKDOWN:
        blocks = markdown_blocks(text)
    else:
        blocks = paragraph_blocks(text)
    if not blocks:
        raise StageFailure(EMPTY_INPUT.code, f"{kind} document has no text")
    return ParsedDocument(kind, title, [ParsedPage.from_blocks(1, blocks)])


# --- PDF ---------------------------------------------------------------------------------------

_PDFIUM_PASSWORD = 4
_PDFIUM_SECURITY = 5  # an encryption scheme PDFium does not support


@contextmanager
def _open_pdf(path: StrPath) -> Iterator[pdfium.PdfDocument]:
    try:
        pdf = pdfium.PdfDocument(os.fspath(path))
    except pdfium.PdfiumError as exc:
        raise _pdf_load_failure(path, exc) from exc
    try:
        yield pdf
    finally:
        pdf.close()


def _pdf_load_failure(path: StrPath, exc: pdfium.PdfiumError) -> StageFailure:
    # pypdfium2 also reports a document with no pages as a load failure, with whatever error code
    # PDFium last set, possibly for an earlier document; so "no pages" is checked first, directly.
    if _pdf_opens_without_pages(path):
        return StageFailure(EMPTY_INPUT.code, "PDF has no pages")
    if exc.err_code in (_PDFIUM_PASSWORD, _PDFIUM_SECURITY):
        return StageFailure(ENCRYPTED_INPUT.code, f"PDF needs a password: {exc}")
    return StageFailure(CORRUPT_INPUT.code, f"PDF could not be loaded: {exc} (err_code={exc.err_code})")


def _pdf_opens_without_pages(path: StrPath) -> bool:
    handle = pdfium_raw.FPDF_LoadDocument(os.fsencode(path) + b"\0", None)
    if not handle:  # a real load failure, which sets PDFium's error code afresh
        return False
    try:
        return bool(pdfium_raw.FPDF_GetPageCount(handle) == 0)
    finally:
        pdfium_raw.FPDF_CloseDocument(handle)


def pdf_page_count(path: StrPath) -> int:
    """Number of pages in the PDF at ``path``."""
    with _open_pdf(path) as pdf:
        return len(pdf)


def pdf_title(path: StrPath) -> str | None:
    """The title in the PDF's metadata, if any."""
    with _open_pdf(path) as pdf:
        return pdf.get_metadata_dict().get("Title", "").strip() or None


def iter_pdf_pages(path: StrPath, start: int = 0) -> Iterator[ParsedPage]:
    """Pages of a PDF from page ``start + 1`` on.

    A page with no text layer but with something drawn on it (a scan, vector outlines) has
    ``needs_ocr``; a page with nothing on it at all is simply empty, so a PDF of blank pages is
    not sent through OCR page by page. PDFium recovers the readable pages of a damaged file and
    fails on the bad ones; a bad page fails the document (``corrupt_input``) rather than silently
    leaving a hole in it.
    """
    with _open_pdf(path) as pdf:
        for index in range(start, len(pdf)):
            raw_text, drawn = _pdf_page_content(pdf, index)
            text = _clean_extracted_text(raw_text)
            if text:
                yield ParsedPage.from_blocks(index + 1, paragraph_blocks(text))
            else:
                yield ParsedPage(index + 1, "", needs_ocr=drawn)


def _pdf_page_content(pdf: pdfium.PdfDocument, index: int) -> tuple[str, bool]:
    """The page's text layer and whether anything at all is drawn on it."""
    try:
        page = pdf[index]
        try:
            drawn = pdfium_raw.FPDFPage_CountObjects(page.raw) > 0
            textpage = page.get_textpage()
            try:
                return str(textpage.get_text_range()), drawn
            finally:
                textpage.close()
        finally:
            page.close()
    except pdfium.PdfiumError as exc:
        raise StageFailure(CORRUPT_INPUT.code, f"PDF page {index + 1} could not be read: {exc}") from exc


def render_pdf_page(path: StrPath, page_number: int, dpi: int = 200) -> Image.Image:
    """Page ``page_number`` (1-based) as a grayscale image at ``dpi``, for OCR."""
    with pdf_renderer(path) as render:
        return render(page_number, dpi)


@contextmanager
def pdf_renderer(path: StrPath) -> Iterator[Callable[[int, int], Image.Image]]:
    """``render(page_number, dpi)`` for many pages of one PDF, opened once (a long PDF costs
    more to open than a page costs to render)."""
    with _open_pdf(path) as pdf:

        def render(page_number: int, dpi: int = 200) -> Image.Image:
            if not 1 <= page_number <= len(pdf):
                raise ValueError(f"page {page_number} is outside 1..{len(pdf)}")
            try:
                page = pdf[page_number - 1]
                try:
                    # A native bitmap's buffer belongs to Python, so the image outlives the page.
                    image: Image.Image = page.render(scale=dpi / 72, grayscale=True).to_pil()
                finally:
                    page.close()
            except pdfium.PdfiumError as exc:
                raise StageFailure(
                    CORRUPT_INPUT.code, f"PDF page {page_number} could not be rendered: {exc}"
                ) from exc
            return image

        yield render


_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean_extracted_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL_CHARS.sub("", text).strip()


# --- DOCX --------------------------------------------------------------------------------------

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


# --- HTML --------------------------------------------------------------------------------------

_HTML_DROPPED = ["script", "style", "noscript", "template", "head", "svg", "iframe", "object"]
_HTML_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_HTML_LISTS = frozenset({"ul", "ol", "menu"})
_HTML_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog"}
    | {"div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr"}
    | {"legend", "main", "nav", "p", "section", "summary", "td", "th", "tr"}
)


def html_blocks(html: str) -> tuple[str | None, list[Block]]:
    """The ``<title>`` and the blocks of an HTML document, without scripts, styles and templates."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = _collapse_spaces(title_node.text()) if title_node is not None else ""
    tree.strip_tags(_HTML_DROPPED)
    walker = _HtmlWalker()
    root = tree.body or tree.root
    if root is not None:
        walker.walk(root)
    return title or None, walker.blocks


class _HtmlWalker:
    """Collects blocks in document order. Iterative, so deeply nested markup cannot overflow."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._inline: list[str] = []
        self._list_depth = 0
        self._item_levels: list[int] = []  # the list items we are inside, innermost last

    def walk(self, root: LexborNode) -> None:
        stack: list[tuple[LexborNode, bool]] = [(root, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                self._leave(node.tag or "")
            elif self._enter(node):
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(list(node.iter(include_text=True))))
        self._flush()

    def _enter(self, node: LexborNode) -> bool:
        """Handle an opening node; True when its children should be visited."""
        tag = node.tag or ""
        if tag == "-text":
            self._inline.append(node.text_content or "")
            return False
        if tag == "br":
            self._inline.append("\n")
            return False
        if tag in _HTML_HEADINGS or tag in ("pre", "table"):
            self._flush()
            self._add_atomic(node, tag)
            return False
        if tag in _HTML_LISTS or tag == "li" or tag in _HTML_BLOCKS:
            self._flush()
            if tag in _HTML_LISTS:
                self._list_depth += 1
            elif tag == "li":
                self._item_levels.append(max(self._list_depth, 1))
        return not tag.startswith("-")  # comments and other non-elements have nothing to show

    def _leave(self, tag: str) -> None:
        if tag in _HTML_LISTS or tag == "li" or tag in _HTML_BLOCKS:
            self._flush()
            if tag in _HTML_LISTS:
                self._list_depth -= 1
            elif tag == "li":
                self._item_levels.pop()

    def _add_atomic(self, node: LexborNode, tag: str) -> None:
        if tag == "pre":
            code = (node.text(deep=True) or "").strip("\n")
            if code.strip():
                self.blocks.append(Block("code", code))
        elif tag == "table":
            rows = [
                " | ".join(_html_inline_text(cell) for cell in _html_cells(row)) for row in _html_rows(node)
            ]
            rows = [row for row in rows if row.replace("|", "").strip()]
            if rows:
                self.blocks.append(Block("table", "\n".join(rows)))
        elif text := _html_inline_text(node):
            self.blocks.append(Block("heading", text, _HTML_HEADINGS[tag]))

    def _flush(self) -> None:
        lines = (_collapse_spaces(line) for line in "".join(self._inline).split("\n"))
        text = "\n".join(line for line in lines if line)
        self._inline.clear()
        if not text:
            return
        if self._item_levels:
            self.blocks.append(Block("list", text, self._item_levels[-1]))
        else:
            self.blocks.append(Block("paragraph", text))


def _html_rows(table: LexborNode) -> Iterator[LexborNode]:
    """The rows of ``table`` itself; rows of nested tables are read as text of their cell."""
    for row in table.css("tr"):
        owner = row.parent
        while owner is not None and owner.tag != "table":
            owner = owner.parent
        if owner is not None and owner.mem_id == table.mem_id:
            yield row


def _html_cells(row: LexborNode) -> Iterator[LexborNode]:
    return (child for child in row.iter() if child.tag in ("td", "th"))


def _html_inline_text(node: LexborNode) -> str:
    parts = []
    for child in node.traverse(include_text=True):
        if child.tag == "-text":
            parts.append(child.text_content or "")
        elif child.tag == "br" or child.tag in _HTML_BLOCKS or child.tag in _HTML_LISTS:
            parts.append(" ")  # keep words of adjacent blocks apart
    return _collapse_spaces("".join(parts))


def _collapse_spaces(text: str) -> str:
    return " ".join(text.split())


# --- Markdown and plain text -------------------------------------------------------------------

_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_MD_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(\S.*)$")
_MD_TABLE_RULE = re.compile(r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$")
_MD_QUOTE = re.compile(r"^ {0,3}>[ \t]?")
_MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")


def _atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line (``## Title ##``), else None.

    String methods, not a regular expression: a heading followed by a long run of spaces made
    the backtracking pattern take hours while holding the GIL.
    """
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    level = len(stripped) - len(stripped.lstrip("#"))
    rest = stripped[level:]
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    text = rest.strip(" \t")
    without_closing = text.rstrip("#")
    if without_closing != text and (not without_closing or without_closing[-1] in " \t"):
        text = without_closing.rstrip(" \t")
    return level, text


def markdown_blocks(text: str) -> list[Block]:
    """Blocks of a Markdown document: a small line-based reading of the common constructs."""
    lines = _without_front_matter(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    blocks: list[Block] = []
    current: list[str] = []  # lines of the paragraph or list item being read
    item_level: int | None = None

    def flush() -> None:
        nonlocal item_level
        joined = _markdown_inline("\n".join(current))
        if joined:
            blocks.append(Block("list", joined, item_level) if item_level else Block("paragraph", joined))
        current.clear()
        item_level = None

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if fence := _MD_FENCE.match(line):
            flush()
            closing = fence.group(1)
            body = []
            while index < len(lines) and not lines[index].lstrip().startswith(closing):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end of the document)
            code = "\n".join(body).strip("\n")
            if code.strip():
                blocks.append(Block("code", code))
        elif not line.strip():
            flush()
        elif heading := _atx_heading(line):
            flush()
            if title := _markdown_inline(heading[1]):
                blocks.append(Block("heading", title, heading[0]))
        elif current and item_level is None and (underline := _MD_SETEXT_UNDERLINE.match(line)):
            title = _markdown_inline(" ".join(current))
            current.clear()
            blocks.append(Block("heading", title, 1 if underline.group(1).startswith("=") else 2))
        elif _MD_RULE.match(line):
            flush()
        elif (
            "|" in line and index < len(lines) and "|" in lines[index] and _MD_TABLE_RULE.match(lines[index])
        ):
            flush()
            rows = [line]
            index += 1  # skip the rule under the header row
            while index < len(lines) and "|" in lines[index] and lines[index].strip():
                rows.append(lines[index])
                index += 1
            blocks.append(Block("table", "\n".join(_markdown_table_row(row) for row in rows)))
        elif item := _MD_ITEM.match(line):
            flush()
            item_level = 1 + len(item.group(1).expandtabs(4)) // 2
            current.append(item.group(2))
        else:
            current.append(_MD_QUOTE.sub("", line).strip())
    flush()
    return blocks


def _without_front_matter(lines: list[str]) -> list[str]:
    """Drop a YAML front-matter block: metadata, not content (and its rules would read as headings)."""
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1 :]
    return lines


def _markdown_inline(text: str) -> str:
    text = _MD_LINK.sub(r"\1", text)
    return text.replace("**", "").replace("`", "").strip()


def _markdown_table_row(row: str) -> str:
    cells = row.strip().strip("|").split("|")
    return " | ".join(_markdown_inline(cell) for cell in cells)


def paragraph_blocks(text: str) -> list[Block]:
    """Plain text as paragraphs separated by blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = (paragraph.strip() for paragraph in re.split(r"\n[ \t]*\n", text))
    return [Block("paragraph", paragraph) for paragraph in paragraphs if paragraph]


def _read_text(path: StrPath) -> str:
    decoded = decode_text(Path(path).read_bytes())
    if decoded is None:
        raise StageFailure(CORRUPT_INPUT.code, "text is not valid UTF-8, UTF-16 or GB18030")
    return decoded.text


# --- images ------------------------------------------------------------------------------------

MAX_IMAGE_PIXELS = 80_000_000
_IMAGE_FORMATS = ["PNG", "JPEG", "TIFF"]
# What Pillow raises on damaged or truncated image data.
_IMAGE_ERRORS = (OSError, SyntaxError, ValueError, EOFError)


@contextmanager
def _open_image(path: StrPath) -> Iterator[Image.Image]:
    with open(path, "rb") as file:  # outside the try: a missing file is not a corrupt upload
        try:
            # Pillow only warns between its own pixel limit and twice that; make it an error here.
            # (catch_warnings is process-global: fine for one parse per worker process.)
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                image = Image.open(file, formats=_IMAGE_FORMATS)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise StageFailure(
                UNSUPPORTED_INPUT.code, f"image is too large to process safely: {exc}"
            ) from exc
        except _IMAGE_ERRORS as exc:
            raise StageFailure(CORRUPT_INPUT.code, f"image could not be opened: {exc}") from exc
        with image:
            yield image


def _select_frame(image: Image.Image, number: int) -> None:
    """Seek to frame ``number`` (1-based), refuse it when too large, and decode it."""
    try:
        image.seek(number - 1)
    except _IMAGE_ERRORS as exc:
        raise StageFailure(CORRUPT_INPUT.code, f"image frame {number} could not be read: {exc}") from exc
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise StageFailure(
            UNSUPPORTED_INPUT.code,
            f"image frame {number} is {width}x{height} pixels, over the {MAX_IMAGE_PIXELS:,} pixel limit",
        )
    try:
        image.load()
    except _IMAGE_ERRORS as exc:
        raise StageFailure(CORRUPT_INPUT.code, f"image frame {number} could not be decoded: {exc}") from exc


def image_frame_count(path: StrPath) -> int:
    """Number of frames (pages) in the image; multi-page TIFFs have several."""
    with _open_image(path) as image:
        return getattr(image, "n_frames", 1)


def iter_image_pages(path: StrPath, start: int = 0) -> Iterator[ParsedPage]:
    """One page per image frame from frame ``start + 1`` on, each decoded once to prove it is
    intact; the text comes later from OCR."""
    with _open_image(path) as image:
        for index in range(start, getattr(image, "n_frames", 1)):
            _select_frame(image, index + 1)
            yield ParsedPage(index + 1, "", needs_ocr=True)


def render_image_page(path: StrPath, page_number: int) -> Image.Image:
    """Frame ``page_number`` (1-based) upright (EXIF orientation applied) in grayscale, for OCR."""
    with _open_image(path) as image:
        frames = getattr(image, "n_frames", 1)
        if not 1 <= page_number <= frames:
            raise ValueError(f"page {page_number} is outside 1..{frames}")
        _select_frame(image, page_number)
        return ImageOps.exif_transpose(image).convert("L")
