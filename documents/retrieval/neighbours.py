"""The chunks around a hit: the previous and next ``n`` chunks of the same document version, in
reading order, so a reader (or a language model) gets the passage a hit sits in, not just the
hit. One query for all hits of a search; the hits come from versions the caller may search, and
the neighbours never leave a hit's own version.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from django.db.models import Q

from documents.models import Chunk

# More context than this is a document, not a passage: read the document instead.
MAX_NEIGHBOURS = 5


@dataclass(frozen=True)
class Neighbour:
    """One chunk next to a hit: its ordinal in the version, its whole text and where it is."""

    ordinal: int
    text: str
    page_start: int
    page_end: int
    heading_path: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Around:
    """The chunks before a hit and after it, each list in reading order (nearest last / first)."""

    before: list[Neighbour] = field(default_factory=list)
    after: list[Neighbour] = field(default_factory=list)


class HitLike(Protocol):
    """What :func:`neighbours_of` reads of a hit (a ``documents.search.SearchHit``)."""

    @property
    def version_id(self) -> uuid.UUID: ...

    @property
    def ordinal(self) -> int: ...


def neighbours_of(hits: Sequence[HitLike], n: int) -> list[Around]:
    """For each hit, in the hits' order, up to ``n`` chunks (at most :data:`MAX_NEIGHBOURS`)
    before it and after it in its version; fewer at the version's start and end."""
    if n < 0 or n > MAX_NEIGHBOURS:
        raise ValueError(f"neighbours is 0-{MAX_NEIGHBOURS}")
    if n == 0 or not hits:
        return [Around() for _ in hits]
    wanted = Q()
    for hit in hits:
        wanted |= Q(version_id=hit.version_id, ordinal__gte=hit.ordinal - n, ordinal__lte=hit.ordinal + n)
    rows = Chunk.objects.filter(wanted).values_list(
        "version_id", "ordinal", "text", "page_start", "page_end", "heading_path"
    )
    found = {
        (version_id, ordinal): Neighbour(ordinal, text, page_start, page_end, list(path or []))
        for version_id, ordinal, text, page_start, page_end, path in rows
    }
    around = []
    for hit in hits:
        before = [found.get((hit.version_id, hit.ordinal - d)) for d in range(n, 0, -1)]
        after = [found.get((hit.version_id, hit.ordinal + d)) for d in range(1, n + 1)]
        around.append(Around([c for c in before if c], [c for c in after if c]))
    return around
