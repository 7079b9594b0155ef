"""The JSON body parser of ``/api`` and ``/v1``: DRF's, with a bound on nesting and on list sizes.

Python's decoder recurses once per level: a body of 100,000 ``[`` ran it out of stack, and the
``RecursionError`` answered 500. Nesting is measured before decoding, by a linear scan of the
brackets outside strings, and a body deeper than ``MAX_JSON_DEPTH`` is a 400 (``json_too_deep``).
After decoding, no array or object may hold more than ``MAX_JSON_ITEMS`` entries
(``json_too_many_items``): every list a body carries has a bound even where its field sets none
(fields set tighter ones, with their own messages).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext_noop
from rest_framework.parsers import JSONParser

from documents.api.refusal import ApiError
from documents.texts import Text

MAX_JSON_DEPTH = 32
MAX_JSON_ITEMS = 1000

# A JSON string (escapes included) as one unrolled loop: linear, nothing to backtrack into.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    if data.count(b"[") + data.count(b"{") == 0:
        return 0
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub(b"", data)):
        if bracket in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _largest(value: Any) -> int:
    """The most entries any one array or object inside ``value`` holds (iterative: no recursion)."""
    largest = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            largest = max(largest, len(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            largest = max(largest, len(item))
            stack.extend(item)
    return largest


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = stream.read() if stream is not None else b""
        if isinstance(data, str):
            data = data.encode()
        if json_depth(data) > MAX_JSON_DEPTH:
            message = Text(gettext_noop("JSON bodies nest at most %(depth)s levels."), depth=MAX_JSON_DEPTH)
            raise ApiError(400, "json_too_deep", message)
        parsed = super().parse(io.BytesIO(data), media_type, parser_context)
        if _largest(parsed) > MAX_JSON_ITEMS:
            text = gettext_noop("A list or object in the body holds at most %(count)s entries.")
            message = Text(text, count=MAX_JSON_ITEMS)
            raise ApiError(400, "json_too_many_items", message)
        return parsed
