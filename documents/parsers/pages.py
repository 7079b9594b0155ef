"""What the parsers produce: pages of text with structure blocks."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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

    kind: str
    title: str | None
    pages: list[ParsedPage]
