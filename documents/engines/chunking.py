"""Deterministic, structure-aware chunking of parsed pages.

``chunk_pages`` is a pure function: the same pages and limits always give the same chunks with
the same ordinals, so a retried or taken-over chunking stage rewrites exactly the rows it wrote
before. Rules, in order of precedence:

- A heading closes the current chunk and opens a section. Every chunk's text starts with its
  heading path (``Guide > Install``) as context, so a chunk read alone still says where it is.
  What the embedder and the full-text index see of a chunk (:func:`embedded_text`) also starts
  with the document's title: a contextual chunk header, with no model involved.
- No chunk is above ``max_tokens``, its context header included. Chunks are filled up to
  ``target_tokens``.
- Tables and code blocks stay whole when they fit in ``max_tokens``; larger ones split between
  lines. Paragraphs above the target split at sentence ends (Latin ``.!?``, Chinese full stop
  and full-width ``!?;``), lists between items; a sentence above the maximum splits between words
  (or CJK characters), and as a last resort between characters.
- No text is lost: the chunks' bodies, in order, hold every block's text.

Sizes are measured by a ``measure`` function in tenths of a token, so sums are exact integers.
:func:`chunk_for_model` measures with the active embedder's own tokenizer and keeps every chunk,
header and special tokens included, inside the model's window (a longer text would be cut by the
model, unseen). Without a tokenizer the sizes are estimates: a CJK character counts as one token,
a Latin word as 1.3, a run of punctuation as one.
"""

# long-module: one pure chunker (structure, CJK, overlap and token budget rules interact); splitting
# it would scatter one algorithm.

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

BLOCK_KINDS = frozenset({"heading", "paragraph", "table", "list", "code"})
_WHOLE_IF_FITS = frozenset({"table", "code"})  # kept whole up to max_tokens, not just the target
_SPLIT_BY_LINE = frozenset({"table", "code", "list"})

DEFAULT_TARGET_TOKENS = 350
DEFAULT_MAX_TOKENS = 500
PATH_SEPARATOR = " > "
# What a version's chunks were cut by besides their sizes (recorded with them): bump when the
# chunk text, or the text the embedder and the full-text index get of it, changes, so an
# operator sees which versions an upgrade has not re-ingested yet (docs/upgrading.md).
CHUNKING_SCHEME = "contextual-v2"
# A title this long already says what the document is; more would eat the chunk's room.
TITLE_CONTEXT_CHARS = 120

# Tenths of a token of a text (without the special tokens a model adds once per text).
Measure = Callable[[str], int]


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


def embedded_text(title: str, text: str) -> str:
    """What the embedder and the full-text index get of a chunk of text ``text`` (which starts
    with its heading path): the document's title first, as context, unless the text starts with
    it already (a top heading that repeats the title)."""
    title = " ".join(title.split())[:TITLE_CONTEXT_CHARS]
    if not title or text.startswith(title):
        return text
    return f"{title}\n{text}" if text else title


MAX_CHARS_PER_TOKEN = 12


def token_measure(count: Callable[[str], int]) -> tuple[Measure, int]:
    """A :data:`Measure` from a model's token count (special tokens included), and how many
    special tokens it adds to every text."""
    specials = count("")

    # The chunker measures most pieces twice (when cutting a block, when filling a chunk). A piece
    # counts at least one token per MAX_CHARS_PER_TOKEN characters, whatever the tokenizer says: one
    # that counts a giant "word" as one token (the hashing embedder counts words) must not make a
    # chunk of megabytes.
    @functools.lru_cache(maxsize=4096)
    def measure(text: str) -> int:
        return 10 * max(0, count(text) - specials, -(-len(text) // MAX_CHARS_PER_TOKEN))

    return measure, specials


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


def _split_words(text: str, limit: int, measure: Measure) -> list[str]:
    """Greedy runs of atoms of at most ``limit`` tenths; an atom above it is cut between characters."""
    parts: list[str] = []
    current, size = "", 0
    for match in _ATOM.finditer(text):
        atom = match.group()
        atom_size = measure(atom)
        if atom_size > limit:
            pieces = _split_characters(atom, limit, measure)
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


def _split_characters(text: str, limit: int, measure: Measure) -> list[str]:
    if measure is _deci_tokens:
        # No single character is estimated above 1.3 tokens, so this many always fit.
        width = max(1, limit // _DECI_PER["word"])
        return [text[i : i + width] for i in range(0, len(text), width)]
    # A tokenizer: start from four characters a token and halve until the piece fits.
    pieces, start, guess = [], 0, max(1, limit // 10) * 4
    while start < len(text):
        width = guess
        while width > 1 and measure(text[start : start + width]) > limit:
            width //= 2
        pieces.append(text[start : start + width])
        start += width
    return pieces


def _block_pieces(kind: str, text: str, target: int, maximum: int, measure: Measure) -> list[str]:
    """``text`` cut into pieces of at most ``maximum`` tenths that concatenate back to ``text``."""
    if measure(text) <= (maximum if kind in _WHOLE_IF_FITS else target):
        return [text]
    coarse = _split_lines(text) if kind in _SPLIT_BY_LINE else _split_sentences(text)
    pieces: list[str] = []
    for part in coarse:
        if measure(part) <= maximum:
            pieces.append(part)
        else:
            pieces.extend(_split_words(part, target, measure))
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
    def __init__(
        self, target_tokens: int, max_tokens: int, *, measure: Measure, title: str, specials: int
    ) -> None:
        if not 20 <= target_tokens <= max_tokens:
            # Below about 20 tokens a heading path and a sentence no longer fit in one chunk.
            raise ValueError("need 20 <= target_tokens <= max_tokens")
        self.measure, self.title = measure, title
        # The model's special tokens come with every chunk: they are part of its maximum.
        self.target = (target_tokens - specials) * 10
        self.maximum = (max_tokens - specials) * 10
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
        if self.measure(prefix) > self.path_budget:
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
        # The context header (title, heading path) is part of every chunk of the section.
        header = embedded_text(self.title, self.draft.prefix + "\n\n" if self.draft.prefix else "")
        header_size = self.measure(header + "\n" if header else "")
        # Room for at least a few words, however long the header.
        target = max(self.target - header_size, 40)
        maximum = max(self.maximum - header_size, 40)
        for index, piece in enumerate(_block_pieces(kind, text, target, maximum, self.measure)):
            size = self.measure(piece)
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
    title: str = "",
    measure: Measure = _deci_tokens,
    specials: int = 0,
) -> list[Chunk]:
    """Cut parsed pages into chunks with ordinals ``0..n-1``; see the module docstring for the rules.

    Sizes count the chunk's :func:`embedded_text` (with ``title``) by ``measure``, plus
    ``specials`` tokens. Pages are taken in the order given. Deterministic: equal input gives
    equal output.
    """
    chunker = _Chunker(target_tokens, max_tokens, measure=measure, title=title, specials=specials)
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


def with_overlap(
    chunks: Sequence[Chunk], overlap_tokens: int, measure: Measure = _deci_tokens
) -> list[Chunk]:
    """Each chunk after the first starts with the last words of the one before, up to
    ``overlap_tokens`` (by ``measure``), after its heading line: a vector store's static
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
            if measure(" ".join([word, *tail])) > overlap_tokens * 10:
                break
            tail.insert(0, word)
        text = head + (" ".join(tail) + " " if tail else "") + body
        result.append(replace(chunk, text=text, char_count=len(text)))
        previous_body = body
    return result


def chunk_for_model(
    pages: Sequence[ChunkInputPage],
    *,
    title: str,
    count: Callable[[str], int],
    window: int,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = 0,
) -> list[Chunk]:
    """Chunks whose :func:`embedded_text` the model sees whole: ``count`` is its tokenizer's count
    (special tokens included) and ``window`` the most tokens it sees. Sizes are its tokens; the
    maximum (overlap included) is bounded by the window, and the overlap by half of it.

    A tokenizer's count of a text is not always the sum of its parts' counts (a word cut between
    characters, joins), so every chunk is measured whole at the end and, if one is over, the
    pages are cut again a little smaller. ``token_estimate`` holds each chunk's count."""
    measure, specials = token_measure(count)
    limit = min(max_tokens + overlap_tokens, window)
    overlap = min(overlap_tokens, limit // 2)
    maximum = limit - overlap
    chunks: list[Chunk] = []
    for _attempt in range(6):
        maximum = max(maximum, 20 + specials)
        target = max(min(target_tokens, maximum), 20)
        cut = chunk_pages(
            pages, target_tokens=target, max_tokens=maximum, title=title, measure=measure, specials=specials
        )
        chunks = with_overlap(cut, overlap, measure)
        sizes = [count(embedded_text(title, chunk.text)) for chunk in chunks]
        over = max(sizes, default=0) - limit
        chunks = [replace(chunk, token_estimate=size) for chunk, size in zip(chunks, sizes, strict=True)]
        if over <= 0:
            break
        maximum -= max(over, maximum // 20, 1)
    return chunks
