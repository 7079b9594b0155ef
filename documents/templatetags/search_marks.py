"""``{{ hit.snippet|highlight:query }}``: the query's terms wrapped in ``<mark>``, safely."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from documents.retrieval.text import highlight_spans

register = template.Library()


@register.filter
def highlight(text: str, query: str) -> SafeString:
    """``text`` escaped, with the query's terms in ``<mark>``: whole words (case-insensitive, no
    stop words unless the query is only those) and matched CJK runs
    (:func:`documents.retrieval.text.highlight_spans`).

    Matches are found in the raw text and every piece is escaped on its own before the markup is
    added: matching in already-escaped text could split an entity (a query "amp" inside
    ``&amp;``), and the user's text never reaches ``mark_safe`` unescaped.
    """
    text = str(text)
    pieces: list[str] = []
    last = 0
    for start, end in highlight_spans(text, str(query or "")):
        pieces.append(escape(text[last:start]))
        pieces.append(f"<mark>{escape(text[start:end])}</mark>")
        last = end
    pieces.append(escape(text[last:]))
    return mark_safe("".join(pieces))  # every piece above is escaped
