"""Input validation of the API (the shapes of its answers: ``documents/api/output.py``)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from documents.api.refusal import ApiError
from documents.attributes import KEY_PATTERN, MAX_ATTRIBUTES, MAX_STRING_LENGTH
from documents.retrieval.filters import Filter, parse_filter_json
from documents.retrieval.neighbours import MAX_NEIGHBOURS
from documents.selectors import DEFAULT_ORDERING, ORDERINGS, STATE_WORDS

# A browser form's CSRF token (checked by the middleware) is part of any form a page posts.
FORM_TOKENS = frozenset({"csrfmiddlewaretoken"})
_SHOWN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def reject_unknown(data: Any, known: Collection[str], also: Collection[str] = ()) -> None:
    """One rule for every input of the API: a body key or query parameter it does not take is a
    400 naming it (``unknown_field``), never silently ignored (a misspelt ``limit`` for ``k``
    would otherwise search with the default and look like it worked). ``also``: names let
    through without being listed as expected (a browser form's CSRF token)."""
    if not isinstance(data, Mapping):
        return
    unknown = sorted(str(name) for name in data if name not in known and name not in also)
    if unknown:
        # The name is echoed only when it is a plain identifier (never markup or a long value).
        name = unknown[0] if _SHOWN_NAME.fullmatch(unknown[0]) else "?"
        message = f"Unknown field “{name}”; expected only: {', '.join(sorted(known))}."
        raise ApiError(400, "unknown_field", message, {name: [message]})


class StrictIn(serializers.Serializer[Any]):
    """An API input that takes only its fields (and ``also_known``: parameters read elsewhere,
    e.g. the paginator's ``page``)."""

    also_known: ClassVar[frozenset[str]] = frozenset()

    def to_internal_value(self, data: Any) -> Any:
        reject_unknown(data, {*self.fields, *self.also_known}, also=FORM_TOKENS)
        return super().to_internal_value(data)


ATTRIBUTES_HELP = (
    f"Up to {MAX_ATTRIBUTES} typed attributes for search filters: names match {KEY_PATTERN}; "
    f"values are strings (up to {MAX_STRING_LENGTH} characters), numbers, booleans or dates "
    "(a string YYYY-MM-DD is a date)."
)


@extend_schema_field(
    {
        "type": "object",
        "maxProperties": MAX_ATTRIBUTES,
        "additionalProperties": {
            "oneOf": [
                {"type": "string", "maxLength": MAX_STRING_LENGTH},
                {"type": "number"},
                {"type": "boolean"},
            ]
        },
        "example": {"department": "legal", "year": 2024, "confidential": False, "signed_on": "2024-03-01"},
    }
)
class AttributesField(serializers.JSONField):
    """A document's attributes (validated by ``documents.services.attributes``, not here)."""


class UploadIn(StrictIn):
    file = serializers.FileField(allow_empty_file=True, help_text="The document (PDF, DOCX, HTML, ...).")
    title = serializers.CharField(required=False, allow_blank=True, max_length=300)
    attributes = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=20_000,
        help_text=f'A JSON object, e.g. {{"year": 2024}}. {ATTRIBUTES_HELP}',
    )
    collection = serializers.UUIDField(
        required=False,
        help_text="The collection's id (a new document only; default: the workspace's default).",
    )
    access = serializers.CharField(
        required=False,
        max_length=4000,
        help_text=(
            "A new document's own access list: principal keys, comma-separated (everyone, user:<id>, "
            "group:<id>). Omitted: it inherits its collection's list."
        ),
    )


class DocumentPatchIn(StrictIn):
    """What ``PATCH`` changes; fields left out stay as they are."""

    title = serializers.CharField(required=False, min_length=1, max_length=300)
    attributes = AttributesField(required=False, help_text=f"Replaces all attributes. {ATTRIBUTES_HELP}")


COLLECTIONS_HELP = "Only documents of these collections (ids, comma-separated)."
NEIGHBOURS_HELP = (
    f"0-{MAX_NEIGHBOURS}: with each hit, the whole text of this many chunks before and after it in "
    "its document version (the passage around the hit)."
)


class CollectionIdsField(serializers.ListField):
    """Collection ids as a comma-separated query parameter (``collections=a,b``)."""

    child = serializers.UUIDField()

    def to_internal_value(self, data: Any) -> Any:
        items = [data] if isinstance(data, str) else list(data)
        parts = [part.strip() for item in items for part in str(item).split(",")]
        return super().to_internal_value([part for part in parts if part])


class ListIn(StrictIn):
    also_known = frozenset({"page", "page_size"})  # the paginator's
    state = serializers.ChoiceField(choices=STATE_WORDS, required=False, help_text="Latest version's state.")
    q = serializers.CharField(
        max_length=200, required=False, allow_blank=True, help_text="Part of the title (any case)."
    )
    ordering = serializers.ChoiceField(
        choices=list(ORDERINGS),
        default=DEFAULT_ORDERING,
        help_text="last_activity (a new version moves a document up), title or created; '-': descending.",
    )
    collection = serializers.UUIDField(required=False, help_text="Only documents of this collection.")
    collections = CollectionIdsField(required=False, max_length=100, help_text=COLLECTIONS_HELP)


SEARCH_MODES = ["hybrid", "semantic", "lexical"]
MODE_HELP = (
    "hybrid (default): full-text and semantic rankings fused by their scores, each as far as it is clear; "
    "lexical: full text only (BM25-class); semantic: embedding similarity only."
)


FILTERS_HELP = (
    'Attribute filter: {"type": "eq|ne|gt|gte|lt|lte|in|nin", "key", "value"} or '
    '{"type": "and|or", "filters": [...]}.'
)


class SearchIn(StrictIn):
    q = serializers.CharField(max_length=500, help_text="What to look for.")
    k = serializers.IntegerField(min_value=1, max_value=50, default=10, help_text="How many results.")
    mode = serializers.ChoiceField(choices=SEARCH_MODES, default="hybrid", help_text=MODE_HELP)
    collections = CollectionIdsField(required=False, max_length=100, help_text=COLLECTIONS_HELP)
    neighbours = serializers.IntegerField(
        min_value=0, max_value=MAX_NEIGHBOURS, default=0, help_text=NEIGHBOURS_HELP
    )
    filters = serializers.CharField(
        required=False, allow_blank=True, max_length=4000, help_text=f"As JSON text. {FILTERS_HELP}"
    )

    def validate_filters(self, value: str) -> Filter | None:
        # JSON text, as the search page takes it: a malformed one is a 400 naming the parameter
        # (FilterError), as a malformed filter in a POST body is.
        return parse_filter_json(value) if value.strip() else None


class SearchBodyIn(StrictIn):
    query = serializers.CharField(max_length=500, help_text="What to look for.")
    k = serializers.IntegerField(min_value=1, max_value=50, default=10, help_text="How many results.")
    mode = serializers.ChoiceField(choices=SEARCH_MODES, default="hybrid", help_text=MODE_HELP)
    filters = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text=FILTERS_HELP,
    )
    document_ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100, help_text="Only these documents."
    )
    collections = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100, help_text="Only these collections."
    )
    neighbours = serializers.IntegerField(
        min_value=0, max_value=MAX_NEIGHBOURS, default=0, help_text=NEIGHBOURS_HELP
    )


class SearchComponentOut(serializers.Serializer[Any]):
    rank = serializers.IntegerField(help_text="Rank in this list (1 = first).")
    score = serializers.FloatField(
        help_text="lexical: the full-text engine's relevance (higher is better); semantic: cosine similarity."
    )


class SearchComponentsOut(serializers.Serializer[Any]):
    lexical = SearchComponentOut(required=False)
    semantic = SearchComponentOut(required=False)


class NeighbourOut(serializers.Serializer[Any]):
    ordinal = serializers.IntegerField(help_text="The chunk's place in its version (0 = first).")
    text = serializers.CharField(help_text="The chunk's whole text.")
    page_start = serializers.IntegerField()
    page_end = serializers.IntegerField()
    heading_path = serializers.ListField(child=serializers.CharField())


class NeighboursOut(serializers.Serializer[Any]):
    before = NeighbourOut(many=True, help_text="The chunks before the hit, in reading order.")
    after = NeighbourOut(many=True, help_text="The chunks after the hit, in reading order.")


class SearchHitOut(serializers.Serializer[Any]):
    document_id = serializers.UUIDField()
    document_title = serializers.CharField()
    attributes = serializers.JSONField()
    version = serializers.IntegerField()
    page_start = serializers.IntegerField()
    page_end = serializers.IntegerField()
    heading_path = serializers.ListField(child=serializers.CharField())
    snippet = serializers.CharField(help_text="Plain text around the first matched term.")
    highlight = serializers.CharField(
        help_text="The snippet as HTML: text escaped, matched query terms in <mark>...</mark>."
    )
    score = serializers.FloatField(
        help_text=(
            "Fused score, 0-1, comparable across queries: 1 = first in every list of the mode, "
            "the lists equally clear and fully trusted."
        )
    )
    components = SearchComponentsOut(help_text="The hit's rank and score in each list that holds it.")
    ordinal = serializers.IntegerField(help_text="The hit chunk's place in its version (0 = first).")
    neighbours = NeighboursOut(
        required=False, help_text="With neighbours=N: the N chunks before and after the hit in its version."
    )


class SearchOut(serializers.Serializer[Any]):
    query = serializers.CharField()
    mode = serializers.ChoiceField(choices=SEARCH_MODES)
    results = SearchHitOut(many=True)
