"""Deterministic, structure-aware chunking of parsed pages.

``chunk_pages`` is a pure function: the same pages and limits always give the same chunks with
the same ordinals, so a retried or taken-over chunking stage rewrites exactly the rows it wrote
before. Rules, in order of precedence:

- A heading closes the current chunk and opens a section. Every chunk's text starts with its
  heading path (``Guide > Install``) as context, so a chunk read alone still says where it is.
- No chunk is estimated above ``max_tokens``. Chunks are filled up to ``target_tokens``.
- Tables and code blocks stay whole when they fit in ``max_tokens``; larger ones split between
  lines. Paragraphs above the target split at sentence ends (Latin ``.!?``, Chinese full stop
  and full-width ``!?;``), lists between items; a sentence above the maximum splits between words
  (or CJK characters), and as a last resort between characters.
- No text is lost: the chunks' bodies, in order, hold every block's text.

Sizes are estimates with no tokenizer: a CJK character counts as one token, a Latin word as 1.3,
a run of punctuation as one. They are kept in tenths of a token as integers, so sums are exact.
"""

# long-module: one pure chunker (structure, CJK, overlap and token budget rules interact); splitting
# it would scatter one algorithm.

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

BLOCK_KINDS = frozenset({"heading", "paragraph", "table", "list", "code"})
_WHOLE_IF_FITS = frozenset({"table", "code"})  # kept whole up to max_tokens, not just the target
_SPLIT_BY_LINE = frozenset({"table", "code", "list"})

DEFAULT_TARGET_TOKENS = 350
DEFAULT_MAX_TOKENS = 500
PATH_SEPARATOR = " > "


@dataclass(frozen=True)
class Block:
    """One structural unit from the parser. ``level`` is the heading level (1 = top); 0 otherwise."""

    kind: str
    text: str
    level: int = 0

    def __post_init__(self) -> None:
        if self.kind not in BLOCK_KINDS:
            raise ValueError(f"unknown block kind {self.kind!r}; expected one of {sorted(BLOCK_KINDS)}")


@dataclass(frozen=True)
class ChunkInputPage:
    """A page of parsed blocks in reading order. ``number`` is the 1-based page number."""

    number: int
    blocks: Sequence[Block] = field(default_factory=tuple)


@dataclass(frozen=True)
class Chunk:
    """One chunk. ``text`` starts with the heading path line when ``heading_path`` is not empty."""

    ordinal: int
    text: str
    page_start: int
    page_end: int
    heading_path: tuple[str, ...]
    char_count: int
    token_estimate: int


# --- size estimation ----------------------------------------------------------------------------

# Han (with extensions), kana, hangul, and CJK punctuation and full-width forms.
_CJK_CHAR = (
    r"\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
    r"\U00020000-\U0002fa1f"
)
_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK_CHAR}])|(?P<word>[^\W_{_CJK_CHAR}]+)|(?P<punct>(?:[^\w\s{_CJK_CHAR}]|_)+)"
)
_DECI_PER = {"cjk": 10, "word": 13, "punct": 10}


_WORD_CHARS_PER_UNIT = 8


def _deci_tokens(text: str) -> int:
    """Estimated tokens of ``text``, in tenths. Splitting a text never lowers the sum of its parts.

    A word counts 1.3 per started run of 8 characters and a punctuation run 1 per 8, so a text
    without spaces (a hex dump, one giant "word", a line of two million "[") is measured by its
    length and split, instead of passing as a single token.
    """
    total = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup or "punct"
        units = 1 if kind == "cjk" else -(-len(m.group()) // _WORD_CHARS_PER_UNIT)
        total += _DECI_PER[kind] * units
    return total


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: CJK character 1, Latin word 1.3, punctuation run 1 (rounded up)."""
    return math.ceil(_deci_tokens(text) / 10)


# --- splitting one block's text -----------------------------------------------------------------

# A sentence ends after a Chinese full stop or full-width ! ? ; (no space follows in Chinese), or
# after Latin .!? followed by whitespace and then something that does not look like a continuation
# (a lowercase letter after "e.g. " or "approx. " means the sentence goes on). Closing quotes and
# brackets stay with their sentence. Escapes, because these characters look alike on screen.
_CJK_SENTENCE_ENDERS = "\u3002\uff01\uff1f\uff1b"
_CLOSERS = "\"'\u2019\u201d\u300d\u300f\uff09)\\]"
_SENTENCE_END = re.compile(
    rf"(?:[{_CJK_SENTENCE_ENDERS}]+|\u2026+|(?<![.!?])[.!?]++(?=[{_CLOSERS}]*(?:\s+(?![\sa-z])|$)))[{_CLOSERS}]*\s*"
)
# An atom is one CJK character or one whitespace-free run, each with its trailing whitespace.
_ATOM = re.compile(rf"(?:[{_CJK_CHAR}]|[^\s{_CJK_CHAR}]+)\s*|\s+")


def _split_sentences(text: str) -> list[str]:
    parts, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > start:
            parts.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _split_lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _split_words(text: str, limit: int) -> list[str]:
    """Greedy runs of atoms of at most ``limit`` tenths; an atom above it is cut between characters."""
    parts: list[str] = []
    current, size = "", 0
    for match in _ATOM.finditer(text):
        atom = match.group()
        atom_size = _deci_tokens(atom)
        if atom_size > limit:
            pieces = _split_characters(atom, limit)
        elif size + atom_size > limit and current:
            parts.append(current)
            current, size = atom, atom_size
            continue
        else:
            current, size = current + atom, size + atom_size
            continue
        if current:
            parts.append(current)
        parts.extend(pieces)
        current, size = "", 0
    if current:
        parts.append(current)
    return parts


def _split_characters(text: str, limit: int) -> list[str]:
    # No single character is estimated above 1.3 tokens, so this many always fit.
    width = max(1, limit // _DECI_PER["word"])
    return [text[i : i + width] for i in range(0, len(text), width)]


def _block_pieces(kind: str, text: str, target: int, maximum: int) -> list[str]:
    """``text`` cut into pieces of at most ``maximum`` tenths that concatenate back to ``text``."""
    if _deci_tokens(text) <= (maximum if kind in _WHOLE_IF_FITS else target):
        return [text]
    coarse = _split_lines(text) if kind in _SPLIT_BY_LINE else _split_sentences(text)
    pieces: list[str] = []
    for part in coarse:
        if _deci_tokens(part) <= maximum:
            pieces.append(part)
        else:
            pieces.extend(_split_words(part, target))
    return pieces


# --- assembling chunks --------------------------------------------------------------------------


@dataclass
class _Draft:
    """The chunk being filled: its body parts and the pages they came from."""

    path: tuple[str, ...]
    prefix: str
    parts: list[str] = field(default_factory=list)
    pages: list[int] = field(default_factory=list)
    size: int = 0
    opens_section: bool = False  # its heading appears in no chunk yet

    @property
    def empty(self) -> bool:
        return not self.parts


class _Chunker:
    def __init__(self, target_tokens: int, max_tokens: int) -> None:
        if not 20 <= target_tokens <= max_tokens:
            # Below about 20 tokens a heading path and a sentence no longer fit in one chunk.
            raise ValueError("need 20 <= target_tokens <= max_tokens")
        self.target = target_tokens * 10
        self.maximum = max_tokens * 10
        # A heading path may use at most a quarter of the target; longer "headings" are body text.
        self.path_budget = self.target // 4
        self.stack: list[tuple[int, str]] = []  # (level, heading text) from the top
        self.chunks: list[Chunk] = []
        self.draft = _Draft(path=(), prefix="")

    def add_heading(self, text: str, level: int, page: int) -> None:
        level = max(level, 1)
        stack = [entry for entry in self.stack if entry[0] < level] + [(level, text)]
        path = tuple(heading for _, heading in stack)
        prefix = PATH_SEPARATOR.join(path)
        if _deci_tokens(prefix) > self.path_budget:
            self.add_body("paragraph", text, page)  # too long to be a heading: keep it as text
            return
        previous = self.draft
        # A section with no body still gets a chunk of its own unless its heading lives on in the
        # next chunk's path (a subsection directly under it), so no heading text is lost.
        keep_empty = previous.opens_section and path[: len(previous.path)] != previous.path
        self._flush(keep_empty=keep_empty)
        self.stack = stack
        self.draft = _Draft(path=path, prefix=prefix, pages=[page], opens_section=True)

    def add_body(self, kind: str, text: str, page: int) -> None:
        prefix_size = _deci_tokens(self.draft.prefix)
        target, maximum = self.target - prefix_size, self.maximum - prefix_size
        for index, piece in enumerate(_block_pieces(kind, text, target, maximum)):
            size = _deci_tokens(piece)
            if not self.draft.empty and self.draft.size + size > target:
                self._flush(keep_empty=False)
                self.draft = _Draft(path=self.draft.path, prefix=self.draft.prefix)
            # A new block starts a new paragraph; the pieces of one block join as they were cut.
            separator = "\n\n" if index == 0 and not self.draft.empty else ""
            self.draft.parts.append(separator + piece)
            self.draft.pages.append(page)
            self.draft.size += size

    def finish(self) -> list[Chunk]:
        self._flush(keep_empty=self.draft.opens_section)
        return self.chunks

    def _flush(self, *, keep_empty: bool) -> None:
        draft = self.draft
        if draft.empty and not keep_empty:
            return
        body = "".join(draft.parts).rstrip()
        text = f"{draft.prefix}\n\n{body}" if draft.prefix and body else (draft.prefix or body)
        if not text:
            return
        self.chunks.append(
            Chunk(
                ordinal=len(self.chunks),
                text=text,
                page_start=min(draft.pages),
                page_end=max(draft.pages),
                heading_path=draft.path,
                char_count=len(text),
                token_estimate=estimate_tokens(text),
            )
        )


def _clean(kind: str, text: str) -> str:
    # Leading spaces carry meaning in code (indentation); elsewhere surrounding whitespace does not.
    return text.strip("\n").rstrip() if kind == "code" else text.strip()


def chunk_pages(
    pages: Sequence[ChunkInputPage],
    *,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> list[Chunk]:
    """Cut parsed pages into chunks with ordinals ``0..n-1``; see the module docstring for the rules.

    Pages are taken in the order given. Deterministic: equal input gives equal output.
    """
    chunker = _Chunker(target_tokens, max_tokens)
    for page in pages:
        for block in page.blocks:
            text = _clean(block.kind, block.text)
            if not text:
                continue
            if block.kind == "heading":
                chunker.add_heading(" ".join(text.split()), block.level, page.number)
            else:
                chunker.add_body(block.kind, text, page.number)
    return chunker.finish()


def with_overlap(chunks: Sequence[Chunk], overlap_tokens: int) -> list[Chunk]:
    """Each chunk after the first starts with the last words of the one before, up to
    ``overlap_tokens`` (estimated), after its heading line: a vector store's static
    ``chunk_overlap_tokens``. Callers chunk with ``max_tokens`` reduced by the overlap, so no
    chunk grows past the size asked for."""
    if overlap_tokens <= 0:
        return list(chunks)
    result: list[Chunk] = []
    previous_body = ""
    for chunk in chunks:
        head, body = "", chunk.text
        if chunk.heading_path:
            first, _, rest = chunk.text.partition("\n")
            head, body = first + "\n", rest
        tail: list[str] = []
        for word in reversed(previous_body.split()):
            if estimate_tokens(" ".join([word, *tail])) > overlap_tokens:
                break
            tail.insert(0, word)
        text = head + (" ".join(tail) + " " if tail else "") + body
        result.append(replace(chunk, text=text, char_count=len(text)))
        previous_body = body
    return result
