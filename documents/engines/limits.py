"""Limits on what one document may expand to while it is read, each failing with its own cause.

Pure (no Django): the sandbox child gets them as plain values. The defaults are the settings'
defaults (``DOCUMENTS_MAX_*``, see docs/limits.md); the causes are registered
by the document job kind (:mod:`documents.causes`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from jobs.errors import StageFailure

TOO_MANY_PAGES = "too_many_pages"
TEXT_TOO_LONG = "text_too_long"
NESTING_TOO_DEEP = "nesting_too_deep"
LINE_TOO_LONG = "line_too_long"
PAGE_TOO_LARGE = "page_too_large"
TOO_MANY_CHUNKS = "too_many_chunks"
RESOURCE_LIMIT = "resource_limit"


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What a parser may meet before it gives up with a specific cause."""

    max_pages: int = 10_000
    max_text_chars: int = 20_000_000
    max_html_depth: int = 25_000
    max_line_chars: int = 1_000_000

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def check_page_count(self, pages: int) -> None:
        if pages > self.max_pages:
            raise StageFailure(TOO_MANY_PAGES, f"{pages} pages, over the limit of {self.max_pages}")

    def check_text_length(self, chars: int) -> None:
        if chars > self.max_text_chars:
            raise StageFailure(
                TEXT_TOO_LONG, f"{chars} characters of text, over the limit of {self.max_text_chars}"
            )

    def check_line_length(self, text: str) -> None:
        """For pattern-based parsing (Markdown): no line above ``max_line_chars``."""
        start = 0
        while start < len(text):
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if end - start > self.max_line_chars:
                raise StageFailure(
                    LINE_TOO_LONG, f"a line of {end - start} characters, over {self.max_line_chars}"
                )
            start = end + 1

    def check_html_depth(self, html: str) -> None:
        """Refuse markup nested deeper than ``max_html_depth`` before the HTML parser sees it.

        lexbor's tree building grows with the square of the depth (200,000 nested ``<div>`` took
        91 s). This is a linear estimate from the tags alone: elements whose end tag is optional
        or that have none (``p``, ``li``, ``br``...) are not counted, so unclosed paragraphs do
        not look deep; a self-closing or void tag does not open anything.
        """
        depth = deepest = 0
        for match in _TAG.finditer(html):
            closing, name, self_closing = match.group(1), match.group(2).lower(), match.group(3)
            if name in _NOT_NESTING or self_closing:
                continue
            if closing:
                depth = max(0, depth - 1)
            else:
                depth += 1
                deepest = max(deepest, depth)
        if deepest > self.max_html_depth:
            raise StageFailure(
                NESTING_TOO_DEEP, f"markup nested {deepest} deep, over the limit of {self.max_html_depth}"
            )


# A tag name, then anything up to the next "<" or ">" (so no scan runs past the next tag: linear
# even on "<a<a<a..."), then an optional "/". The name is possessive: giving characters back to
# the attributes never turns a failed match into a match, it only rescanned the rest 30 times.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]{0,30}+)[^<>]*?(/?)>")
_NOT_NESTING = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
    | {"p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup"}
    | {"colgroup", "caption", "rb", "rt", "rp", "html", "head", "body"}
)
