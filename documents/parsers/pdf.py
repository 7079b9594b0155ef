"""PDF: the text layer page by page with PDFium; pages without one are marked for OCR."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from documents.causes import CORRUPT_INPUT, EMPTY_INPUT, ENCRYPTED_INPUT
from documents.engines.limits import PAGE_TOO_LARGE, ParseLimits
from documents.parsers import FileKind, Kind, Parser
from documents.parsers.markup import paragraph_blocks
from documents.parsers.pages import ParsedDocument, ParsedPage, StrPath
from jobs.errors import StageFailure

if TYPE_CHECKING:
    import pypdfium2 as pdfium
    from PIL import Image

# PDFium and Pillow are imported where a PDF is read: the sandbox child starts afresh for every
# document and imports the parsers, and a text file's child need not load them (bench/README.md,
# "Bulk small documents").

_PDFIUM_PASSWORD = 4
_PDFIUM_SECURITY = 5  # an encryption scheme PDFium does not support


@contextmanager
def _open_pdf(path: StrPath) -> Iterator[pdfium.PdfDocument]:
    import pypdfium2 as pdfium

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
    import pypdfium2.raw as pdfium_raw

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
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_raw

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


MAX_RENDER_PIXELS = 100_000_000


def render_pdf_page(
    path: StrPath, page_number: int, dpi: int = 200, *, max_pixels: int = MAX_RENDER_PIXELS
) -> Image.Image:
    """Page ``page_number`` (1-based) as a grayscale image at ``dpi``, for OCR."""
    with pdf_renderer(path, max_pixels=max_pixels) as render:
        return render(page_number, dpi)


@contextmanager
def pdf_renderer(
    path: StrPath, *, max_pixels: int = MAX_RENDER_PIXELS
) -> Iterator[Callable[[int, int], Image.Image]]:
    """``render(page_number, dpi)`` for many pages of one PDF, opened once (a long PDF costs
    more to open than a page costs to render).

    A page whose bitmap at ``dpi`` would exceed ``max_pixels`` fails with ``page_too_large``
    before anything is allocated: a 447-byte PDF with one 14,400-point page asked for a
    40,000 x 40,000 bitmap (7.9 GB).
    """
    import pypdfium2 as pdfium

    with _open_pdf(path) as pdf:

        def render(page_number: int, dpi: int = 200) -> Image.Image:
            if not 1 <= page_number <= len(pdf):
                raise ValueError(f"page {page_number} is outside 1..{len(pdf)}")
            try:
                page = pdf[page_number - 1]
                try:
                    width, height = page.get_size()
                    pixels = math.ceil(width * dpi / 72) * math.ceil(height * dpi / 72)
                    if pixels > max_pixels:
                        raise StageFailure(
                            PAGE_TOO_LARGE,
                            f"PDF page {page_number} is {width:.0f}x{height:.0f} pt: {pixels:,} pixels "
                            f"at {dpi} dpi, over the limit of {max_pixels:,}",
                        )
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


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    # The page count is checked by the caller, which also sees every page's text.
    return iter_pdf_pages(path, start=start)


def _document(path: StrPath, kind: str) -> ParsedDocument:
    return ParsedDocument(kind, pdf_title(path), list(iter_pdf_pages(path)))


PARSER = Parser(
    kinds=(FileKind(Kind.PDF, "application/pdf", (".pdf",), magic=("application/pdf",)),),
    pages=_pages,
    document=_document,
    page_count=lambda path, kind: pdf_page_count(path),
    renderer=lambda path, max_pixels: pdf_renderer(path, max_pixels=max_pixels),
    scalable=True,
)
