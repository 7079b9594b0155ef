"""Turn a stored upload into pages of text with structure blocks, or fail with a classified cause.

PDFs and images are parsed page by page, so a stage can checkpoint after every page and resume with
``start_page``; the other formats are one page. Headings, paragraphs, list items, tables and code
are kept as :class:`Block` objects so that chunking can follow the document's structure. Failures
raise :class:`jobs.errors.StageFailure` with ``unsupported_input``, ``corrupt_input``,
``encrypted_input`` or ``empty_input``; anything else is a bug or an environment problem and is
left to the engine to classify.
"""

from __future__ import annotations

from collections.abc import Iterator

from documents.causes import EMPTY_INPUT
from documents.engines.limits import ParseLimits
from documents.engines.parsing.blocks import Block, BlockKind, ParsedDocument, ParsedPage, StrPath
from documents.engines.parsing.images import image_frame_count, iter_image_pages, render_image_page
from documents.engines.parsing.markup import html_blocks, markdown_blocks, paragraph_blocks, read_text
from documents.engines.parsing.pdf import (
    iter_pdf_pages,
    pdf_page_count,
    pdf_renderer,
    pdf_title,
    render_pdf_page,
)
from documents.engines.parsing.word import parse_docx
from documents.engines.sniff import Kind
from jobs.errors import StageFailure

__all__ = [
    "Block",
    "BlockKind",
    "ParsedDocument",
    "ParsedPage",
    "StrPath",
    "page_count",
    "parse",
    "parse_document",
    "pdf_page_count",
    "pdf_renderer",
    "render_image_page",
    "render_pdf_page",
]


def parse(
    path: StrPath, kind: Kind, *, start_page: int = 0, limits: ParseLimits | None = None
) -> Iterator[ParsedPage]:
    """The pages of a document, from page ``start_page + 1`` on, within ``limits`` (the defaults
    when None): the one-page formats check text length, line length and nesting here; the page
    count and the running text total are the caller's (it sees every page).

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
        yield from _parse_single_page(path, kind, limits or ParseLimits()).pages[start_page:]


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
    return _parse_single_page(path, kind, ParseLimits())


def _parse_single_page(path: StrPath, kind: Kind, limits: ParseLimits) -> ParsedDocument:
    if kind is Kind.DOCX:
        document = parse_docx(path)
        limits.check_text_length(sum(len(page.text) for page in document.pages))
        return document
    text = read_text(path)
    limits.check_text_length(len(text))
    title: str | None = None
    if kind is Kind.HTML:
        limits.check_html_depth(text)
        title, blocks = html_blocks(text)
    elif kind is Kind.MARKDOWN:
        limits.check_line_length(text)
        blocks = markdown_blocks(text)
    else:
        blocks = paragraph_blocks(text)
    if not blocks:
        raise StageFailure(EMPTY_INPUT.code, f"{kind} document has no text")
    return ParsedDocument(kind, title, [ParsedPage.from_blocks(1, blocks)])
