"""A toy parser module, as a deployment would write one: comma-separated rows, one page per row.

It is not in ``documents/parsers/``, so nothing finds it by itself: the tests register it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from documents.engines.limits import ParseLimits
from documents.parsers import FileKind, Parser, register, unregister
from documents.parsers.pages import Block, ParsedDocument, ParsedPage, StrPath

CSV = "csv"


def _rows(path: StrPath) -> list[str]:
    return [line for line in Path(path).read_text().splitlines() if line.strip()]


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    for number, row in enumerate(_rows(path)[start:], start=start + 1):
        yield ParsedPage.from_blocks(number, [Block("table", " | ".join(row.split(",")))])


def _sniff_text(text: str, filename: str) -> str | None:
    rows = [line for line in text.splitlines() if line.strip()]
    named = PurePosixPath(filename).suffix.lower() == ".csv"
    commas = {row.count(",") for row in rows}
    return CSV if named and rows and len(commas) == 1 and commas != {0} else None


PARSER = Parser(
    kinds=(FileKind(CSV, "text/csv", (".csv",)),),
    pages=_pages,
    document=lambda path, kind: ParsedDocument(kind, None, list(_pages(path, kind, 0, ParseLimits()))),
    page_count=lambda path, kind: len(_rows(path)),
    sniff_text=_sniff_text,
)


@contextmanager
def registered() -> Iterator[Parser]:
    """The toy parser registered for the ``with`` block, and unregistered after it."""
    parser = register(PARSER)
    try:
        yield parser
    finally:
        unregister(parser)
