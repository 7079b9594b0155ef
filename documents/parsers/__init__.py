"""The parser registry: which file kinds the platform reads, how each is recognised, checked at
upload, parsed and rendered for OCR.

A parser is one module in this package that defines ``PARSER``, a :class:`Parser`: the kinds it
reads (:class:`FileKind`: the name stored on each version and sent to the sandbox child, the
content type, usual file extensions, the ``filetype`` guesses that mean it), how it sniffs content
that no signature settles, its upload check, and its functions (pages from a start page, page
count, the whole document with its title, a page renderer for OCR). The modules are found when the
registry is first asked, so adding one needs no other edit; :func:`register` takes a parser
defined elsewhere (a deployment's, a test's). A kind claimed twice is refused.

No Django here or in any parser module: parsing runs inside the sandbox child, which has none.
"""

from __future__ import annotations

import enum
import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from documents.engines.limits import ParseLimits
from documents.parsers.pages import ParsedDocument, ParsedPage, StrPath

if TYPE_CHECKING:
    from PIL import Image


class Kind(enum.StrEnum):
    """The names of the built-in kinds, for code and tests that name one. Stable: they are stored
    on each version and sent to the sandbox child. What the platform accepts is what the registry
    holds; a new parser's kind need not be listed here."""

    PDF = "pdf"
    DOCX = "docx"
    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"
    PNG = "png"
    JPEG = "jpeg"
    TIFF = "tiff"


@dataclass(frozen=True, slots=True)
class FileKind:
    """One kind a parser reads."""

    name: str
    content_type: str
    extensions: tuple[str, ...] = ()
    # ``filetype`` MIME guesses that mean this kind (only these of its guesses are trusted).
    magic: tuple[str, ...] = ()
    # What users call it where the platform lists the types it reads (an upload refusal, the
    # upload form), in English: the name in capitals when empty. A word rather than a format's
    # name is marked with ``jobs.errors._`` so that the pages say it in the reader's language.
    label: str = ""

    @property
    def shown_as(self) -> str:
        return self.label or self.name.upper()


# A page renderer: ``render(page_number, dpi)`` (1-based page) -> a grayscale image, for OCR.
Render = Callable[[int, int], "Image.Image"]


class UploadCheckFailed(ValueError):
    """An upload check (or a sniffer) refused the bytes. ``code`` is the rejection code the client
    sees, ``message`` is safe to show (None: the platform's "type not supported" message),
    ``detail`` is for operators."""

    def __init__(self, code: str, message: str | None, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.message = message
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Parser:
    """What a parser module declares. The functions get the kind's name, for modules of several.

    - ``pages(path, kind, start, limits)``: the pages from page ``start + 1`` on, a generator.
    - ``document(path, kind)``: every page and the title the document declares.
    - ``page_count(path, kind)``: how many pages ``pages`` yields from the start; None: one.
    - ``renderer(path, max_pixels)``: a context giving a :data:`Render` for many pages of one
      file; None when the kind has no pages to render. ``scalable``: a render at a low dpi is
      cheap, so OCR looks at a small preview first to skip blank pages.
    - ``signatures`` and ``sniff_binary(data)``: content starting with one of the signatures is
      this parser's kind (the name returned) or nothing the platform reads (None).
    - ``sniff_text(text, filename)``: decoded text is this parser's kind, or None to let the next
      text sniffer look; ``sniff_order`` orders them (lower first; the catch-all plain text last).
    - ``check_upload(content, limits)``: raise :class:`UploadCheckFailed` before anything is
      stored; ``limits`` is what the caller gave for the kind, or None (the check's defaults).
    """

    kinds: tuple[FileKind, ...]
    pages: Callable[[StrPath, str, int, ParseLimits], Iterator[ParsedPage]]
    document: Callable[[StrPath, str], ParsedDocument]
    page_count: Callable[[StrPath, str], int] | None = None
    renderer: Callable[[StrPath, int], AbstractContextManager[Render]] | None = None
    scalable: bool = False
    signatures: tuple[bytes, ...] = ()
    sniff_binary: Callable[[bytes], str | None] | None = None
    sniff_text: Callable[[str, str], str | None] | None = None
    sniff_order: int = 0
    check_upload: Callable[[bytes, Any], None] | None = None


class ParserConflict(ValueError):
    """A parser claims a kind name, or a ``filetype`` guess, another parser already claims."""


class UnknownKind(ValueError):
    """No registered parser reads this kind."""


_parsers: dict[str, Parser] = {}  # kind name -> its parser
_kinds: dict[str, FileKind] = {}
_magic: dict[str, str] = {}  # filetype MIME guess -> kind name
_order: list[Parser] = []  # in registration order
_lock = threading.Lock()
_load_lock = threading.Lock()
_loaded = False


def register(parser: Parser) -> Parser:
    """Add ``parser``; raises :class:`ParserConflict`, changing nothing, when one of its kinds
    (or of their ``filetype`` guesses) is already claimed."""
    with _lock:
        names = [kind.name for kind in parser.kinds]
        guesses = [guess for kind in parser.kinds for guess in kind.magic]
        taken = [name for name in names if name in _parsers] + [g for g in guesses if g in _magic]
        if len(set(names)) < len(names) or len(set(guesses)) < len(guesses):
            taken.append("the same kind twice")
        if taken:
            raise ParserConflict(f"already claimed: {', '.join(taken)}")
        for kind in parser.kinds:
            _parsers[kind.name] = parser
            _kinds[kind.name] = kind
            _magic.update(dict.fromkeys(kind.magic, kind.name))
        _order.append(parser)
    return parser


def unregister(parser: Parser) -> None:
    """Remove ``parser`` (a test's, when it is done)."""
    with _lock:
        for kind in parser.kinds:
            if _parsers.get(kind.name) is parser:
                del _parsers[kind.name], _kinds[kind.name]
                for guess in kind.magic:
                    _magic.pop(guess, None)
        if parser in _order:
            _order.remove(parser)


def _load() -> None:
    """Register the ``PARSER`` of every module of this package, once."""
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if _loaded:
            return
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
            parser = getattr(importlib.import_module(f"{__name__}.{info.name}"), "PARSER", None)
            if isinstance(parser, Parser) and parser not in _order:
                register(parser)
        _loaded = True


def parser_for(kind: str) -> Parser:
    """The parser of ``kind``; raises :class:`UnknownKind`."""
    _load()
    try:
        return _parsers[kind]
    except KeyError:
        raise UnknownKind(f"no parser reads {kind!r}") from None


def file_kind(kind: str) -> FileKind:
    """What the parser of ``kind`` declares about it; raises :class:`UnknownKind`."""
    parser_for(kind)
    return _kinds[kind]


def kind_names() -> list[str]:
    """Every kind the platform reads."""
    _load()
    return list(_kinds)


def labels() -> list[str]:
    """What users call the kinds the platform reads (English, see ``FileKind.label``), once each,
    in alphabetical order."""
    _load()
    return sorted({kind.shown_as for kind in _kinds.values()}, key=str.casefold)


def magic_kind(mime: str) -> str | None:
    """The kind a ``filetype`` guess means, or None when no parser trusts that guess."""
    _load()
    return _magic.get(mime)


def registered() -> list[Parser]:
    """The registered parsers, in the order they were registered."""
    _load()
    return list(_order)


def text_sniffers() -> list[Callable[[str, str], str | None]]:
    """The parsers' text sniffers, in their ``sniff_order``."""
    ordered = sorted(registered(), key=lambda parser: parser.sniff_order)
    return [parser.sniff_text for parser in ordered if parser.sniff_text is not None]
