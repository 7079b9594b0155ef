"""Images (PNG, JPEG, multi-page TIFF): one page per frame, each decoded once; text comes from OCR."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from documents.causes import CORRUPT_INPUT, UNSUPPORTED_INPUT
from documents.engines.limits import ParseLimits
from documents.parsers import FileKind, Kind, Parser
from documents.parsers.pages import ParsedDocument, ParsedPage, StrPath
from jobs.errors import StageFailure

if TYPE_CHECKING:
    from PIL import Image

# Pillow is imported where an image is read (as PDFium in pdf.py): a text file's sandbox child
# need not load it.

MAX_IMAGE_PIXELS = 80_000_000
_IMAGE_FORMATS = ["PNG", "JPEG", "TIFF"]
# What Pillow raises on damaged or truncated image data.
_IMAGE_ERRORS = (OSError, SyntaxError, ValueError, EOFError)


@contextmanager
def _open_image(path: StrPath) -> Iterator[Image.Image]:
    from PIL import Image

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
        from PIL import ImageOps

        return ImageOps.exif_transpose(image).convert("L")


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    return iter_image_pages(path, start=start)


def _document(path: StrPath, kind: str) -> ParsedDocument:
    return ParsedDocument(kind, None, list(iter_image_pages(path)))


@contextmanager
def _renderer(path: StrPath, max_pixels: int) -> Iterator[Callable[[int, int], Image.Image]]:
    """Each frame decoded when asked, at its own size (``MAX_IMAGE_PIXELS`` bounds it, whatever
    the dpi and ``max_pixels`` of a PDF page)."""
    yield lambda page_number, dpi: render_image_page(path, page_number)


PARSER = Parser(
    kinds=(
        FileKind(Kind.PNG, "image/png", (".png",), magic=("image/png",)),
        FileKind(Kind.JPEG, "image/jpeg", (".jpg", ".jpeg"), magic=("image/jpeg",)),
        FileKind(Kind.TIFF, "image/tiff", (".tif", ".tiff"), magic=("image/tiff",)),
    ),
    pages=_pages,
    document=_document,
    page_count=lambda path, kind: image_frame_count(path),
    renderer=_renderer,
)
