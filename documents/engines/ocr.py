"""OCR engines: turn a page image into text, in English and Simplified Chinese.

Two engines sit behind one small protocol so the pipeline can use whichever is installed and switch
to the other after an OCR timeout (the ``ocr_timeout`` retry policy asks for "the alternative
engine"):

- ``tesseract``: Debian ``tesseract-ocr`` (+ ``-eng``, ``-chi-sim``) driven through ``pytesseract``.
  One subprocess per image, so a per-image timeout can really stop it. Faster per page here.
- ``rapidocr``: the ``rapidocr`` package on ``onnxruntime`` with the PP-OCR models it ships (works
  offline). Runs in the calling process, so it has no per-image timeout of its own.

The pipeline runs both inside the parsing sandbox's child (:mod:`documents.sandbox.ocr_page`), whose
CPU-time, wall-time and address-space limits bound either engine on a hostile page.

Failures are classified for the job engine: a missing or failing engine raises
``StageFailure("ocr_engine_unavailable")``, a tesseract run past its timeout or its CPU budget
``StageFailure("ocr_timeout")``, one ended by a signal (out of memory) ``StageFailure("resource_limit")``.
Language codes are tesseract's (``eng``, ``chi_sim``) for both engines.

No Django here: the sandbox child imports this module. Every option (engine, languages, timeout,
threads) comes in as a plain value; the worker reads them from its settings.
"""

# long-module: two engines behind one protocol, with the choice between them and their failure
# classification; splitting them would scatter the rules they share (languages, tidy, causes).

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import threading
from typing import Any, Protocol, runtime_checkable

from PIL import Image

from documents.causes import OCR_ENGINE_UNAVAILABLE, OCR_TIMEOUT, RESOURCE_LIMIT
from jobs.errors import StageFailure

TESSERACT = "tesseract"
RAPIDOCR = "rapidocr"
# Preference order when no setting decides: tesseract was 2-3x faster per page on this hardware.
ENGINE_NAMES: tuple[str, ...] = (TESSERACT, RAPIDOCR)

DEFAULT_LANGUAGES: tuple[str, ...] = ("eng", "chi_sim")
DEFAULT_TESSERACT_TIMEOUT = 120.0


@runtime_checkable
class OcrEngine(Protocol):
    """Recognises the text of one page image."""

    @property
    def name(self) -> str: ...

    def available(self) -> bool:
        """True when the engine's software is installed (cheap; does not run OCR)."""
        ...

    def recognize(self, image: Image.Image, *, languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> str:
        """The page's text, lines separated by newlines; ``""`` for a page without text."""
        ...


# --- text and image normalisation shared by both engines ---------------------------------------

_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# Tesseract puts spaces between Chinese characters on some pages; Chinese has no word spaces.
_SPACE_BETWEEN_CJK = re.compile(rf"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")
_BLANK_LINES = re.compile(r"\n{3,}")


def _tidy(text: str) -> str:
    text = text.replace("\x0c", "")  # tesseract ends every page with a form feed
    text = _SPACE_BETWEEN_CJK.sub("", text)
    lines = [line.rstrip() for line in text.splitlines()]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _as_ocr_input(image: Image.Image) -> Image.Image:
    """An 8-bit grey or RGB image; transparency is flattened onto white, as on paper."""
    if image.mode in ("L", "RGB"):
        return image
    if image.mode in ("RGBA", "LA", "P", "PA"):
        rgba = image.convert("RGBA")
        page = Image.new("RGB", rgba.size, (255, 255, 255))
        page.paste(rgba, mask=rgba.getchannel("A"))
        return page
    return image.convert("L")


def _check_languages(languages: tuple[str, ...]) -> None:
    if not languages:
        raise ValueError("at least one OCR language is required")


# --- tesseract ----------------------------------------------------------------------------------


class TesseractEngine:
    """Tesseract through ``pytesseract``: one subprocess per image, killed after ``timeout`` seconds."""

    name = TESSERACT

    def __init__(self, *, timeout: float = DEFAULT_TESSERACT_TIMEOUT) -> None:
        if timeout <= 0:
            # pytesseract treats 0 as "no timeout"; a hung page must never block a worker forever.
            raise ValueError("the tesseract timeout must be positive")
        self.timeout = timeout
        self._languages: frozenset[str] = frozenset()
        # Tesseract's OpenMP threads fight each other (and the other workers) on a small machine:
        # one thread per process is faster overall. pytesseract hands os.environ to the subprocess;
        # setdefault keeps a value an operator set on purpose.
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")

    def available(self) -> bool:
        return importlib.util.find_spec("pytesseract") is not None and shutil.which("tesseract") is not None

    def _require_languages(self, languages: tuple[str, ...]) -> None:
        if set(languages) <= self._languages:
            return
        # Read again only when something is missing: an operator may have installed the pack since.
        self._languages = self.installed_languages()
        missing = sorted(set(languages) - self._languages)
        if missing:
            raise StageFailure(
                OCR_ENGINE_UNAVAILABLE.code, f"tesseract language packs not installed: {', '.join(missing)}"
            )

    def installed_languages(self) -> frozenset[str]:
        """Language packs tesseract can load; raises ``ocr_engine_unavailable`` if it cannot run."""
        pytesseract = self._module()
        try:
            return frozenset(pytesseract.get_languages())
        except (OSError, pytesseract.TesseractError) as exc:
            raise StageFailure(
                OCR_ENGINE_UNAVAILABLE.code, f"tesseract cannot list languages: {exc}"
            ) from exc

    def recognize(self, image: Image.Image, *, languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> str:
        """Run tesseract on ``image``; see :class:`OcrEngine`."""
        _check_languages(languages)
        self._require_languages(languages)
        pytesseract = self._module()
        try:
            text: str = pytesseract.image_to_string(
                _as_ocr_input(image), lang="+".join(languages), timeout=self.timeout
            )
        except pytesseract.TesseractNotFoundError as exc:
            raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, "tesseract is not installed") from exc
        except pytesseract.TesseractError as exc:
            raise _tesseract_failure(exc) from exc
        except RuntimeError as exc:
            # pytesseract reports its own timeout (after killing the process) only by this message.
            if str(exc) == "Tesseract process timeout":
                raise StageFailure(
                    OCR_TIMEOUT.code, f"tesseract took longer than {self.timeout:g}s on one page"
                ) from exc
            raise
        return _tidy(text)

    @staticmethod
    def _module() -> Any:
        try:
            import pytesseract
        except ImportError as exc:
            raise StageFailure(
                OCR_ENGINE_UNAVAILABLE.code, "the pytesseract package is not installed"
            ) from exc
        return pytesseract


def _tesseract_failure(exc: Any) -> StageFailure:
    """A tesseract process that exits with an error, or is ended by a signal.

    In the sandbox it runs under the child's limits, and its CPU time counts toward the call's
    budget, which the worker enforces by killing the child's process group (an ``ocr_timeout``,
    like its wall-clock timeout); SIGXCPU (the child's lifetime limit) is one too. It dies
    (SIGABRT on a failed allocation, SIGKILL, SIGSEGV) when a page needs more memory than allowed.
    """
    status = getattr(exc, "status", 0)
    if isinstance(status, int) and status < 0:
        if status == -signal.SIGXCPU:
            return StageFailure(OCR_TIMEOUT.code, "tesseract used up its CPU time on one page (SIGXCPU)")
        return StageFailure(RESOURCE_LIMIT.code, f"tesseract was ended by signal {-status} on one page")
    if any(sign in str(exc) for sign in _OUT_OF_MEMORY):
        # Leptonica reports a failed allocation and tesseract exits 1: the page, not the engine.
        return StageFailure(RESOURCE_LIMIT.code, f"tesseract ran out of memory on one page: {exc}"[:2000])
    return StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"tesseract failed: {exc}")


_OUT_OF_MEMORY = ("malloc fail", "bad_alloc", "Cannot allocate memory")


# --- rapidocr -----------------------------------------------------------------------------------

# The bundled PP-OCR "ch" recogniser reads Chinese and Latin script in one model.
_RAPIDOCR_LANGUAGES = frozenset(DEFAULT_LANGUAGES)


class RapidOcrEngine:
    """RapidOCR (PP-OCR models on onnxruntime), loaded once per engine and reused.

    Construction is cheap; the ONNX sessions load on the first page (about a second) and stay.
    The angle classifier is off: on upright scans it rotated correct lines and garbled them.
    """

    name = RAPIDOCR

    def __init__(self, *, threads: int | None = None) -> None:
        self.threads = threads
        self._ocr: Any = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        return all(importlib.util.find_spec(module) is not None for module in ("rapidocr", "onnxruntime"))

    def recognize(self, image: Image.Image, *, languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> str:
        """Run RapidOCR on ``image``; see :class:`OcrEngine`."""
        _check_languages(languages)
        unsupported = sorted(set(languages) - _RAPIDOCR_LANGUAGES)
        if unsupported:
            raise StageFailure(
                OCR_ENGINE_UNAVAILABLE.code, f"rapidocr has no model for: {', '.join(unsupported)}"
            )
        ocr = self._engine()
        try:
            result = ocr(_as_ocr_input(image))
        except MemoryError:
            raise  # the sandbox's address-space limit: ``resource_limit``, not a broken engine
        except Exception as exc:
            raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"rapidocr failed: {exc!r}") from exc
        # Lines come back top to bottom; an empty page yields an output without texts.
        lines = getattr(result, "txts", None) or ()
        return _tidy("\n".join(lines))

    def _engine(self) -> Any:
        # Double-checked so that concurrent first pages in one process build one engine, not two.
        if self._ocr is None:
            with self._lock:
                if self._ocr is None:
                    self._ocr = self._build()
        return self._ocr

    def _build(self) -> Any:
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"rapidocr cannot be imported: {exc}") from exc
        # Its warnings are about blank pages, which are normal here; failures still raise.
        params: dict[str, Any] = {"Global.use_cls": False, "Global.log_level": "error"}
        if self.threads:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = self.threads
        try:
            return RapidOCR(params=params)
        except Exception as exc:
            raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"rapidocr failed to start: {exc!r}") from exc


# --- choosing an engine -------------------------------------------------------------------------
# Plain values in, no settings read: the sandbox child imports this module and has no Django. The
# worker reads its settings (documents/stages/ocr.py) and passes what they say, to these functions
# and, with every page, to the child (documents/sandbox/ocr_page.py builds its engine from them).
_instances: dict[str, OcrEngine] = {}
_instances_lock = threading.Lock()


def build_engine(
    name: str, *, tesseract_timeout: float = DEFAULT_TESSERACT_TIMEOUT, rapidocr_threads: int = 0
) -> OcrEngine:
    """A new engine called ``name`` with these options."""
    if name == TESSERACT:
        return TesseractEngine(timeout=tesseract_timeout)
    if name == RAPIDOCR:
        return RapidOcrEngine(threads=rapidocr_threads or None)
    raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"unknown OCR engine {name!r}")


def _instance(name: str) -> OcrEngine:
    if name not in ENGINE_NAMES:
        raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"unknown OCR engine {name!r}")
    with _instances_lock:
        if name not in _instances:
            _instances[name] = build_engine(name)
        return _instances[name]


def available_engines() -> list[str]:
    """Names of the installed engines, in preference order (tesseract first)."""
    return [name for name in ENGINE_NAMES if _instance(name).available()]


def get_engine(name: str) -> OcrEngine:
    """The process-wide engine called ``name``, with its default options (the worker uses it to
    learn what is installed; pages are read in the sandbox child, by engines built there from the
    worker's options); ``ocr_engine_unavailable`` if unknown or not installed."""
    engine = _instance(name)
    if not engine.available():
        raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, f"OCR engine {name!r} is not installed")
    return engine


def default_engine_name(preferred: str = "") -> str:
    """The engine to use: ``preferred`` (the worker passes its ``OCR_ENGINE`` setting) when
    installed, else any installed.

    Raises ``ocr_engine_unavailable`` when no engine is installed at all.
    """
    installed = available_engines()
    if preferred in installed:
        return preferred
    if installed:
        return installed[0]
    raise StageFailure(OCR_ENGINE_UNAVAILABLE.code, "no OCR engine is installed (tesseract or rapidocr)")


def alternative_engine_name(current: str) -> str | None:
    """Another installed engine than ``current``, for the retry after an OCR timeout; None if none."""
    return next((name for name in available_engines() if name != current), None)
