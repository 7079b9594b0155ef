"""What a document attribute may be: pure rules shared by the attribute service and search filters.

A document carries up to ``MAX_ATTRIBUTES`` typed attributes. JSON has no date type, so the rule is
simple and visible: a string of the form ``YYYY-MM-DD`` that is a real calendar date *is* a date.
Dates are stored as those ISO strings, whose text order is their chronological order, so every
backend compares them as text. No ORM here: this is plain Python, tested without a database.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Literal

from documents.texts import Text, gettext_noop

MAX_ATTRIBUTES = 16
MAX_STRING_LENGTH = 512
# JSON's safe integer range: every client (JavaScript too) and both databases hold these exactly.
MAX_SAFE_INTEGER = 2**53 - 1

KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

Scalar = str | int | float | bool
Kind = Literal["string", "number", "boolean", "date"]


class ValueProblem(ValueError):
    """A value that cannot be an attribute (or a filter operand); ``code`` names the rule broken."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def is_valid_key(key: object) -> bool:
    """True for a string matching ``KEY_PATTERN`` (no quotes or brackets: safe in a JSON path)."""
    return isinstance(key, str) and _KEY_RE.fullmatch(key) is not None


def looks_like_date(value: str) -> bool:
    """True for a string shaped ``YYYY-MM-DD`` (whether or not it is a real calendar date)."""
    return _DATE_RE.fullmatch(value) is not None


def check_value(value: object) -> Kind:
    """Return the kind of an attribute value, or raise ``ValueProblem`` saying why it is not one."""
    # bool first: in Python it is also an int.
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            message: str = Text(gettext_noop("Integers must lie within ±%(limit)s."), limit=MAX_SAFE_INTEGER)
            raise ValueProblem("number_out_of_range", message)
        return "number"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueProblem("number_out_of_range", gettext_noop("Numbers must be finite."))
        return "number"
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            message = Text(gettext_noop("Strings are at most %(limit)s characters."), limit=MAX_STRING_LENGTH)
            raise ValueProblem("string_too_long", message)
        if looks_like_date(value):
            try:
                datetime.date.fromisoformat(value)
            except ValueError:
                message = gettext_noop("A YYYY-MM-DD value must be a real calendar date.")
                raise ValueProblem("invalid_date", message) from None
            return "date"
        return "string"
    raise ValueProblem(
        "invalid_value_type",
        gettext_noop("A value must be a string, a number, a boolean or a date (YYYY-MM-DD)."),
    )
