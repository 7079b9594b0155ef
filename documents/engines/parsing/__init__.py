"""Turn a stored upload into pages of text with structure blocks, or fail with a classified cause.

The kind's parser comes from the registry (:mod:`documents.parsers`, one module per format).
Paged formats (PDF, images) are parsed page by page, so a stage can checkpoint after every page
and resume with ``start_page``; the others are one page. Headings, paragraphs, list items, tables
and code are kept as :class:`Block` objects so that chunking can follow the document's structure.
Failures raise :class:`jobs.errors.StageFailure` with ``unsupported_input``, ``corrupt_input``,
``encrypted_input`` or ``empty_input``; anything else is a bug or an environment problem and is
left to the engine to classify.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager

from documents import parsers
from documents.engines.limits import ParseLimits
from documents.parsers.images import render_image_page
from documents.parsers.pages import Block, BlockKind, ParsedDocument, ParsedPage, StrPath
from documents.parsers.pdf import MAX_RENDER_PIXELS, pdf_page_count, pdf_renderer, render_pdf_page

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
    "renderer",
]


def parse(
    path: StrPath, kind: str, *, start_page: int = 0, limits: ParseLimits | None = None
) -> Iterator[ParsedPage]:
    """The pages of a document, from page ``start_page + 1`` on, within ``limits`` (the defaults
    when None): the one-page formats check text length, line length and nesting here; the page
    count and the running text total are the caller's (it sees every page).

    A generator: failures (:class:`StageFailure`) surface while iterating, and a caller can save
    ``page.number`` as its checkpoint after each page and pass it back as ``start_page``.
    """
    if start_page < 0:
        raise ValueError(f"start_page must be >= 0, not {start_page}")
    yield from parsers.parser_for(kind).pages(path, kind, start_page, limits or ParseLimits())


def page_count(path: StrPath, kind: str) -> int:
    """How many pages :func:`parse` yields from the start: the real total for progress display."""
    counter = parsers.parser_for(kind).page_count
    return 1 if counter is None else counter(path, kind)


def parse_document(path: StrPath, kind: str) -> ParsedDocument:
    """The whole document with its declared title. Prefer :func:`parse` for long PDFs."""
    return parsers.parser_for(kind).document(path, kind)


def renderer(
    path: StrPath, kind: str, *, max_pixels: int = MAX_RENDER_PIXELS
) -> AbstractContextManager[parsers.Render]:
    """``render(page_number, dpi)`` for the pages of one document, for OCR; raises ``ValueError``
    when the kind has no pages to render."""
    opener = parsers.parser_for(kind).renderer
    if opener is None:
        raise ValueError(f"{kind} documents have no pages to render")
    return opener(path, max_pixels)
