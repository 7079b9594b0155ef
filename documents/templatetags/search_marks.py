"""``{{ hit.snippet|highlight:query }}``: the query's terms wrapped in ``<mark>``, safely."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from documents.search import query_terms

register = template.Library()


@register.filter
def highlight(text: str, query: str) -> SafeString:
    """``text`` escaped, with every case-insensitive match of a query term in ``<mark>``.

    Matches are found in the raw text and every piece is escaped on its own before the markup is
    added: matching in already-escaped text could split an entity (a query "amp" inside
    ``&amp;``), and the user's text never reaches ``mark_safe`` unescaped.
    """
    text = str(text)
    terms = query_terms(str(query or ""))
    if not terms:
        return escape(text)
    # Longest first (query_terms' order), so "searching" wins over "search" at the same place.
    pattern = re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        pieces.append(escape(text[last : match.start()]))
        pieces.append(f"<mark>{escape(match.group(0))}</mark>")
        last = match.end()
    pieces.append(escape(text[last:]))
    return mark_safe("".join(pieces))  # every piece above is escaped
