"""Changing a document's own fields: its typed attributes and its title.

Every entry point (upload, ``PATCH /api/documents/{id}/``, the admin, the document page) goes
through ``check_attributes`` / ``document_update``, so one set of rules and error codes holds
everywhere. The rules themselves are in ``documents.attributes`` (pure).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext_noop

from documents.attributes import (
    KEY_PATTERN,
    MAX_ATTRIBUTES,
    Scalar,
    ValueProblem,
    check_value,
    is_valid_key,
)
from documents.models import Document
from documents.texts import Text

TITLE_MAX_LENGTH = 300


class DocumentInputError(ValueError):
    """Refused input for a document's fields: ``field`` is the path of the offending part
    (``attributes.year``, ``attributes``, ``title``), ``code`` is stable for programs and
    ``message`` is safe to show to a user. Nothing has been written when it is raised."""

    http_status = 400

    def __init__(self, field: str, code: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.code = code
        self.message = message


def _shown_key(key: object) -> str:
    """A refused key as the message may show it: short, and only its printable characters."""
    text = "".join(ch for ch in str(key) if ch.isprintable())
    return text[:40] + ("…" if len(text) > 40 else "")


def check_attributes(raw: object, *, field: str = "attributes") -> dict[str, Scalar]:
    """Validate attributes given as decoded JSON and return them as a plain dict.

    Raises ``DocumentInputError`` with one of the codes ``attributes_not_object``,
    ``too_many_attributes``, ``invalid_attribute_key``, ``invalid_value_type``,
    ``string_too_long``, ``invalid_date``, ``number_out_of_range``.
    """
    if not isinstance(raw, Mapping):
        raise DocumentInputError(
            field,
            "attributes_not_object",
            gettext_noop("Attributes must be a JSON object of names and values."),
        )
    if len(raw) > MAX_ATTRIBUTES:
        raise DocumentInputError(
            field,
            "too_many_attributes",
            Text(gettext_noop("A document has at most %(count)s attributes."), count=MAX_ATTRIBUTES),
        )
    checked: dict[str, Scalar] = {}
    for key, value in raw.items():
        if not is_valid_key(key):
            raise DocumentInputError(
                field,
                "invalid_attribute_key",
                Text(
                    gettext_noop(
                        "“%(key)s” is not a valid attribute name: names start with a letter or an "
                        "underscore and hold up to 64 letters, digits, '_', '.' or '-' (%(pattern)s)."
                    ),
                    key=_shown_key(key),
                    pattern=KEY_PATTERN,
                ),
            )
        try:
            check_value(value)
        except ValueProblem as problem:
            raise DocumentInputError(f"{field}.{key}", problem.code, problem.message) from None
        checked[key] = value
    return checked


def attributes_from_json(text: str | bytes, *, field: str = "attributes") -> dict[str, Scalar]:
    """``check_attributes`` for attributes sent as JSON text (a multipart form field)."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise DocumentInputError(
            field,
            "attributes_not_json",
            gettext_noop('Attributes must be a JSON object, e.g. {"year": 2024}.'),
        ) from None
    return check_attributes(raw, field=field)


def check_title(raw: object, *, field: str = "title") -> str:
    """A document title: text, not blank, at most ``TITLE_MAX_LENGTH`` characters."""
    if not isinstance(raw, str) or not raw.strip():
        raise DocumentInputError(field, "invalid_title", gettext_noop("The title must be a non-empty text."))
    title = raw.strip().replace("\x00", "")
    if len(title) > TITLE_MAX_LENGTH:
        raise DocumentInputError(
            field,
            "invalid_title",
            Text(gettext_noop("The title is at most %(count)s characters."), count=TITLE_MAX_LENGTH),
        )
    return title


def document_update(*, document: Document, title: Any = None, attributes: Any = None) -> Document:
    """Change a document's title and/or replace its attributes (``None`` leaves a field as is).

    Both are validated before anything is written; then one UPDATE changes them together, so a
    search filter sees the old attributes or the new ones, never a mix. Returns the document as
    stored.
    """
    changes: dict[str, Any] = {}
    if title is not None:
        changes["title"] = check_title(title)
    if attributes is not None:
        changes["attributes"] = check_attributes(attributes)
    if changes:
        Document.objects.filter(pk=document.pk).update(**changes)
        for name, value in changes.items():
            setattr(document, name, value)
    return document


def document_set_attributes(*, document: Document, attributes: Any) -> Document:
    """Replace a document's attributes with ``attributes`` (decoded JSON), after validation.

    Raises ``DocumentInputError`` (see ``check_attributes``) and then writes nothing.
    """
    return document_update(document=document, attributes=attributes)
