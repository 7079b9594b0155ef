"""Messages that are English where they are made and said in the reader's language where shown.

An error raised deep in a service (a bad filter, a refused attribute) may be logged, stored on a
row or shown to a user. It stays English for the first two; the edge that shows it (a page, the
API's error body) calls ``localize`` to say it in the request's language. A message with values
in it keeps its template beside the text (``Text``), so the catalogue holds one entry
("Must be one of: %(allowed)s.") instead of one per value.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.translation import gettext, pgettext


def gettext_noop(message: str) -> str:
    """Mark ``message`` for the catalogue (makemessages collects ``gettext_noop``) and return it
    unchanged. Django's own needs settings; rules such as the attribute and filter checks are
    also used where there are none."""
    return message


class Text(str):
    """English text that remembers its template and values: a plain ``str`` everywhere (stored,
    compared, sliced), and translatable by ``localize``. Mark the template with ``gettext_noop``
    so ``makemessages`` collects it."""

    template: str
    values: dict[str, object]

    def __new__(cls, template: str, **values: object) -> Text:
        text = super().__new__(cls, template % values if values else template)
        text.template = template
        text.values = values
        return text


class Words(str):
    """English words said as one list (e.g. the file types the platform reads, a value of a
    ``Text``): joined by ", " as a plain ``str``; ``localize`` says each word and the separator
    in the active language (Chinese lists them with "、")."""

    words: tuple[str, ...]

    def __new__(cls, words: Iterable[str]) -> Words:
        items = tuple(words)
        text = super().__new__(cls, ", ".join(items))
        text.words = items
        return text


def localize(message: str) -> str:
    """``message`` in the active language (English when the catalogue has no entry for it)."""
    if not message:
        return message  # gettext("") is the catalogue's header
    if isinstance(message, Words):
        return pgettext("list separator", ", ").join(localize(word) for word in message.words)
    if isinstance(message, Text):
        template = gettext(message.template)
        if not message.values:
            return template
        values = {k: localize(v) if isinstance(v, Text | Words) else v for k, v in message.values.items()}
        return template % values
    return gettext(str(message))
