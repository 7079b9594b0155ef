"""HTML (selectolax), Markdown and plain text: one page of structure blocks each, and which of the
three a decoded text is (the catch-all text sniffer: anything that decodes is at least text)."""

# long-module: the three text kinds share one reader, one limits path and one sniffer that decides
# between them by weighing HTML against Markdown evidence; apart, each would need the others' rules.

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from selectolax.lexbor import LexborHTMLParser, LexborNode

from documents.causes import CORRUPT_INPUT, EMPTY_INPUT
from documents.engines.limits import ParseLimits
from documents.parsers import FileKind, Kind, Parser
from documents.parsers.content import decode_text
from documents.parsers.pages import Block, ParsedDocument, ParsedPage, StrPath
from jobs.errors import StageFailure, _

# --- HTML --------------------------------------------------------------------------------------

_HTML_DROPPED = ["script", "style", "noscript", "template", "head", "svg", "iframe", "object"]
_HTML_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_HTML_LISTS = frozenset({"ul", "ol", "menu"})
_HTML_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog"}
    | {"div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup", "hr"}
    | {"legend", "main", "nav", "p", "section", "summary", "td", "th", "tr"}
)


def html_blocks(html: str) -> tuple[str | None, list[Block]]:
    """The ``<title>`` and the blocks of an HTML document, without scripts, styles and templates."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = _collapse_spaces(title_node.text()) if title_node is not None else ""
    tree.strip_tags(_HTML_DROPPED)
    walker = _HtmlWalker()
    root = tree.body or tree.root
    if root is not None:
        walker.walk(root)
    return title or None, walker.blocks


class _HtmlWalker:
    """Collects blocks in document order. Iterative, so deeply nested markup cannot overflow."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._inline: list[str] = []
        self._list_depth = 0
        self._item_levels: list[int] = []  # the list items we are inside, innermost last

    def walk(self, root: LexborNode) -> None:
        stack: list[tuple[LexborNode, bool]] = [(root, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                self._leave(node.tag or "")
            elif self._enter(node):
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(list(node.iter(include_text=True))))
        self._flush()

    def _enter(self, node: LexborNode) -> bool:
        """Handle an opening node; True when its children should be visited."""
        tag = node.tag or ""
        if tag == "-text":
            self._inline.append(node.text_content or "")
            return False
        if tag == "br":
            self._inline.append("\n")
            return False
        if tag in _HTML_HEADINGS or tag in ("pre", "table"):
            self._flush()
            self._add_atomic(node, tag)
            return False
        if tag in _HTML_LISTS or tag == "li" or tag in _HTML_BLOCKS:
            self._flush()
            if tag in _HTML_LISTS:
                self._list_depth += 1
            elif tag == "li":
                self._item_levels.append(max(self._list_depth, 1))
        return not tag.startswith("-")  # comments and other non-elements have nothing to show

    def _leave(self, tag: str) -> None:
        if tag in _HTML_LISTS or tag == "li" or tag in _HTML_BLOCKS:
            self._flush()
            if tag in _HTML_LISTS:
                self._list_depth -= 1
            elif tag == "li":
                self._item_levels.pop()

    def _add_atomic(self, node: LexborNode, tag: str) -> None:
        if tag == "pre":
            code = (node.text(deep=True) or "").strip("\n")
            if code.strip():
                self.blocks.append(Block("code", code))
        elif tag == "table":
            rows = [
                " | ".join(_html_inline_text(cell) for cell in _html_cells(row)) for row in _html_rows(node)
            ]
            rows = [row for row in rows if row.replace("|", "").strip()]
            if rows:
                self.blocks.append(Block("table", "\n".join(rows)))
        elif text := _html_inline_text(node):
            self.blocks.append(Block("heading", text, _HTML_HEADINGS[tag]))

    def _flush(self) -> None:
        lines = (_collapse_spaces(line) for line in "".join(self._inline).split("\n"))
        text = "\n".join(line for line in lines if line)
        self._inline.clear()
        if not text:
            return
        if self._item_levels:
            self.blocks.append(Block("list", text, self._item_levels[-1]))
        else:
            self.blocks.append(Block("paragraph", text))


def _html_rows(table: LexborNode) -> Iterator[LexborNode]:
    """The rows of ``table`` itself; rows of nested tables are read as text of their cell."""
    for row in table.css("tr"):
        owner = row.parent
        while owner is not None and owner.tag != "table":
            owner = owner.parent
        if owner is not None and owner.mem_id == table.mem_id:
            yield row


def _html_cells(row: LexborNode) -> Iterator[LexborNode]:
    return (child for child in row.iter() if child.tag in ("td", "th"))


def _html_inline_text(node: LexborNode) -> str:
    parts = []
    for child in node.traverse(include_text=True):
        if child.tag == "-text":
            parts.append(child.text_content or "")
        elif child.tag == "br" or child.tag in _HTML_BLOCKS or child.tag in _HTML_LISTS:
            parts.append(" ")  # keep words of adjacent blocks apart
    return _collapse_spaces("".join(parts))


def _collapse_spaces(text: str) -> str:
    return " ".join(text.split())


# --- Markdown and plain text -------------------------------------------------------------------

_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_MD_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_MD_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(\S.*)$")
# A closing "|" is matched with its own trailing blanks, never as an optional "|" between two runs
# of blanks: "[ \t]*\|?[ \t]*$" split a run of blanks every possible way, and "---|---" followed by
# 65,000 spaces held the upload request for 33 s.
_MD_TABLE_RULE = re.compile(r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*(?:\|[ \t]*)?$")
_MD_QUOTE = re.compile(r"^ {0,3}>[ \t]?")
# Label and target exclude their own brackets so that no scan runs past the next "[" or "(":
# linear on any line. The earlier "[^\]\n]*" rescanned the rest of the line from every "[" (a 2 MB
# line of "[" held a worker, GIL and all, for over 12 minutes).
_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")


def _atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line (``## Title ##``), else None.

    String methods, not a regular expression: a heading followed by a long run of spaces made
    the backtracking pattern take hours while holding the GIL.
    """
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    level = len(stripped) - len(stripped.lstrip("#"))
    rest = stripped[level:]
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    text = rest.strip(" \t")
    without_closing = text.rstrip("#")
    if without_closing != text and (not without_closing or without_closing[-1] in " \t"):
        text = without_closing.rstrip(" \t")
    return level, text


def markdown_blocks(text: str) -> list[Block]:
    """Blocks of a Markdown document: a small line-based reading of the common constructs."""
    lines = _without_front_matter(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    blocks: list[Block] = []
    current: list[str] = []  # lines of the paragraph or list item being read
    item_level: int | None = None

    def flush() -> None:
        nonlocal item_level
        joined = _markdown_inline("\n".join(current))
        if joined:
            blocks.append(Block("list", joined, item_level) if item_level else Block("paragraph", joined))
        current.clear()
        item_level = None

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if fence := _MD_FENCE.match(line):
            flush()
            closing = fence.group(1)
            body = []
            while index < len(lines) and not lines[index].lstrip().startswith(closing):
                body.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end of the document)
            code = "\n".join(body).strip("\n")
            if code.strip():
                blocks.append(Block("code", code))
        elif not line.strip():
            flush()
        elif heading := _atx_heading(line):
            flush()
            if title := _markdown_inline(heading[1]):
                blocks.append(Block("heading", title, heading[0]))
        elif current and item_level is None and (underline := _MD_SETEXT_UNDERLINE.match(line)):
            title = _markdown_inline(" ".join(current))
            current.clear()
            blocks.append(Block("heading", title, 1 if underline.group(1).startswith("=") else 2))
        elif _MD_RULE.match(line):
            flush()
        elif (
            "|" in line and index < len(lines) and "|" in lines[index] and _MD_TABLE_RULE.match(lines[index])
        ):
            flush()
            rows = [line]
            index += 1  # skip the rule under the header row
            while index < len(lines) and "|" in lines[index] and lines[index].strip():
                rows.append(lines[index])
                index += 1
            blocks.append(Block("table", "\n".join(_markdown_table_row(row) for row in rows)))
        elif item := _MD_ITEM.match(line):
            flush()
            item_level = 1 + len(item.group(1).expandtabs(4)) // 2
            current.append(item.group(2))
        else:
            current.append(_MD_QUOTE.sub("", line).strip())
    flush()
    return blocks


def _without_front_matter(lines: list[str]) -> list[str]:
    """Drop a YAML front-matter block: metadata, not content (and its rules would read as headings)."""
    if lines and lines[0].strip() == "---":
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1 :]
    return lines


def _markdown_inline(text: str) -> str:
    text = _MD_LINK.sub(r"\1", text)
    return text.replace("**", "").replace("`", "").strip()


def _markdown_table_row(row: str) -> str:
    cells = row.strip().strip("|").split("|")
    return " | ".join(_markdown_inline(cell) for cell in cells)


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def paragraph_blocks(text: str) -> list[Block]:
    """Plain text as paragraphs separated by blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = (paragraph.strip() for paragraph in _PARAGRAPH_BREAK.split(text))
    return [Block("paragraph", paragraph) for paragraph in paragraphs if paragraph]


def read_text(path: StrPath) -> str:
    decoded = decode_text(Path(path).read_bytes())
    if decoded is None:
        raise StageFailure(CORRUPT_INPUT.code, "text is not valid UTF-8, UTF-16 or GB18030")
    return decoded.text


def _document(path: StrPath, kind: str, limits: ParseLimits) -> ParsedDocument:
    text = read_text(path)
    limits.check_text_length(len(text))
    title: str | None = None
    if kind == Kind.HTML:
        limits.check_html_depth(text)
        title, blocks = html_blocks(text)
    elif kind == Kind.MARKDOWN:
        limits.check_line_length(text)
        blocks = markdown_blocks(text)
    else:
        blocks = paragraph_blocks(text)
    if not blocks:
        raise StageFailure(EMPTY_INPUT.code, f"{kind} document has no text")
    return ParsedDocument(kind, title, [ParsedPage.from_blocks(1, blocks)])


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    return iter(_document(path, kind, limits).pages[start:])


# --- HTML, Markdown or plain text ----------------------------------------------------------------

_SAMPLE_CHARS = 65_536  # what the text sniffer looks at
_HTML_DOCUMENT = re.compile(r"<(?:!doctype\s+html|html|head|body)\b", re.IGNORECASE)
_HTML_FRAGMENT_TAGS = (
    "p|div|span|table|ul|ol|h[1-6]|section|article|main|header|footer|nav|title|meta|a|form|pre|blockquote"
)
# The attributes stop at the next "<" as well as at ">": "<p <p <p ..." without a ">" would rescan
# the rest of the text from every "<p" when searched.
_HTML_FRAGMENT = re.compile(rf"<({_HTML_FRAGMENT_TAGS})\b[^<>]*>", re.IGNORECASE)
_HTML_FRAGMENT_END = re.compile(rf"</({_HTML_FRAGMENT_TAGS})[ \t\r\n\f]*>", re.IGNORECASE)

_MARKDOWN_STRONG = (
    re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.MULTILINE),  # ATX heading
    re.compile(r"^ {0,3}(?:```|~~~)", re.MULTILINE),  # code fence
    # table rule under a header row: | --- | :---: |
    re.compile(r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+(?:\|[ \t]*)?$", re.MULTILINE),
    # inline link or image. Neither part may contain its own brackets, so each scan from a "[" or
    # "](" stops at the next one: linear. "[^\]]+" backtracked over a whole line from every "[",
    # and a 64 KB line of "[" held the upload request (and the GIL) for 8 s.
    re.compile(r"!?\[[^\[\]\n]+\]\([^()\s]+\)"),
)
_MARKDOWN_WEAK = (
    re.compile(r"^ {0,3}[-*+][ \t]+\S", re.MULTILINE),  # bullet item
    re.compile(r"^ {0,3}\d{1,9}[.)][ \t]+\S", re.MULTILINE),  # numbered item
    re.compile(r"^ {0,3}>", re.MULTILINE),  # block quote
    re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),  # strong emphasis
    re.compile(r"`[^`\n]+`"),  # inline code
)
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn"})


def text_kind(text: str, *, filename: str = "") -> Kind:
    """HTML, Markdown or plain text, by content; the name's extension only breaks a Markdown tie.

    A document that starts like an HTML page is HTML. Markdown needs two points of evidence (a
    heading, fence, table rule or link counts two; a list, quote, emphasis or inline code one).
    Text starting with an HTML element is an HTML fragment. Anything else is plain text, unless
    it is named like Markdown: unstructured Markdown parses exactly like plain text.
    """
    head = _skip_markup_preamble(text[:_SAMPLE_CHARS])
    if _HTML_DOCUMENT.match(head):
        return Kind.HTML
    if markdown_score(head) >= 2:
        return Kind.MARKDOWN
    fragment = _HTML_FRAGMENT.match(head)
    if fragment and any(
        end.group(1).lower() == fragment.group(1).lower() for end in _HTML_FRAGMENT_END.finditer(head)
    ):
        return Kind.HTML
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    return Kind.MARKDOWN if suffix in MARKDOWN_SUFFIXES else Kind.TEXT


def markdown_score(text: str) -> int:
    """Evidence that ``text`` is Markdown: 2 per strong feature present, 1 per weak one."""
    strong = sum(1 for pattern in _MARKDOWN_STRONG if pattern.search(text))
    weak = sum(1 for pattern in _MARKDOWN_WEAK if pattern.search(text))
    return 2 * strong + weak


def _skip_markup_preamble(text: str) -> str:
    """Drop leading whitespace, an XML declaration and comments, which may precede <html>."""
    text = text.lstrip()
    if text.startswith("<?xml"):
        text = text.partition("?>")[2].lstrip()
    while text.startswith("<!--"):
        text = text.partition("-->")[2].lstrip()
    return text


PARSER = Parser(
    kinds=(
        FileKind(Kind.HTML, "text/html", (".html", ".htm")),
        FileKind(Kind.MARKDOWN, "text/markdown", tuple(sorted(MARKDOWN_SUFFIXES)), label="Markdown"),
        FileKind(Kind.TEXT, "text/plain", (".txt",), label=_("plain text")),
    ),
    pages=_pages,
    document=lambda path, kind: _document(path, kind, ParseLimits()),
    sniff_text=lambda text, filename: text_kind(text, filename=filename),
    sniff_order=100,  # last: it takes any text, as plain text when nothing else fits
)
