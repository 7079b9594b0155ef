"""Render one page and recognise its text: the OCR stage's work, done inside the sandbox child.

Rendering a hostile PDF page and running an OCR engine on it read untrusted bytes, so they run in
the sandbox child (:mod:`documents.sandbox.runner`) like the parsers: under its CPU-time and
address-space limits, killed on a cancel, a lost lease or its wall time. The worker asks for one
page per call (see :mod:`documents.stages.ocr`) and gets back JSON: the text, or that the page is
blank. The child keeps what is costly to set up between calls: the last PDF it opened (a long PDF
costs more to open than a page costs to render) and one engine of each kind (RapidOCR's models
take about a second to load).

No Django settings here: the child has none; the worker sends every option with the request.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from PIL import Image

from documents import parsers
from documents.engines import ocr
from documents.engines.parsing import renderer

BLANK_LEVEL = 245  # grayscale: a page whose darkest pixel is lighter than this has no text
PREVIEW_DPI = 24  # enough to tell a blank page from one with text, at a tiny fraction of the cost


@dataclass(frozen=True, slots=True)
class OcrOptions:
    """What the worker decides for every page (from its settings and the retry hints)."""

    engine: str
    dpi: int = 200
    max_pixels: int = 100_000_000
    tesseract_timeout: float = ocr.DEFAULT_TESSERACT_TIMEOUT
    rapidocr_threads: int = 0
    languages: tuple[str, ...] = ocr.DEFAULT_LANGUAGES

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "dpi": self.dpi,
            "max_pixels": self.max_pixels,
            "tesseract_timeout": self.tesseract_timeout,
            "rapidocr_threads": self.rapidocr_threads,
            "languages": list(self.languages),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OcrOptions:
        return cls(**{**data, "languages": tuple(data["languages"])})


def is_blank(image: Image.Image) -> bool:
    darkest, _ = image.convert("L").getextrema()
    return isinstance(darkest, int | float) and darkest >= BLANK_LEVEL


def page_image(path: str, kind: str, number: int, options: OcrOptions) -> Image.Image | None:
    """Page ``number`` rendered for OCR, or None when the page is blank (checked on a preview
    first where the kind's pages are scalable, as a PDF's: most of a blank page's cost is its
    full-resolution render)."""
    render = _open_renderer(path, kind, options.max_pixels)
    if not parsers.parser_for(kind).scalable:
        image = render(number, options.dpi)
        return None if is_blank(image) else image
    if is_blank(render(number, PREVIEW_DPI)):
        return None
    return render(number, options.dpi)


def recognize_page(path: str, kind: str, number: int, options: dict[str, Any]) -> dict[str, Any]:
    """The sandbox entry point: ``{"blank": True}``, or ``{"blank": False, "text": ...}``."""
    chosen = OcrOptions.from_dict(options)
    image = page_image(path, kind, number, chosen)
    if image is None:
        return {"blank": True, "text": ""}
    text = _engine(chosen).recognize(image, languages=chosen.languages)
    return {"blank": False, "text": text}


# --- what the child keeps between calls -----------------------------------------------------------

_renderer: dict[str, Any] = {}
_engines: dict[tuple[str, float, int], ocr.OcrEngine] = {}


def _open_renderer(path: str, kind: str, max_pixels: int) -> Callable[[int, int], Image.Image]:
    """The renderer of the document at ``path``, kept open for the next page of the same file."""
    stat = os.stat(path)
    key = (path, kind, stat.st_mtime_ns, stat.st_size, max_pixels)
    if _renderer.get("key") != key:
        close_renderer()
        stack = ExitStack()
        render = stack.enter_context(renderer(path, kind, max_pixels=max_pixels))
        _renderer.update(key=key, stack=stack, render=render)
    found: Callable[[int, int], Image.Image] = _renderer["render"]
    return found


def close_renderer() -> None:
    stack = _renderer.pop("stack", None)
    _renderer.clear()
    if stack is not None:
        stack.close()


def _engine(options: OcrOptions) -> ocr.OcrEngine:
    key = (options.engine, options.tesseract_timeout, options.rapidocr_threads)
    if key not in _engines:
        _engines[key] = ocr.build_engine(
            options.engine,
            tesseract_timeout=options.tesseract_timeout,
            rapidocr_threads=options.rapidocr_threads,
        )
    return _engines[key]
