"""Search over a tenant's published versions, ranked by the configured embedder's similarity.

The vectors of the tenant's searchable entries are scored with one matrix product. This is exact
(brute-force) search: right for the embedded single-machine default and for tenants of up to a
few hundred thousand chunks; beyond that an approximate index would take its place behind
:func:`search`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import F, Q

from documents.embedders import configured_embedder
from documents.models import Chunk, IndexEntry, Tenant

SNIPPET_CHARS = 280


@dataclass(frozen=True)
class SearchHit:
    document_id: uuid.UUID
    document_title: str
    version_id: uuid.UUID
    version: int
    page_start: int
    page_end: int
    ordinal: int
    snippet: str
    score: float


def search(tenant: Tenant, query: str, k: int = 10, *, version: Any = None) -> list[SearchHit]:
    """The ``k`` best chunks for ``query`` in ``tenant``'s published versions.

    With ``version`` the search is restricted to that one version, published or not: the
    indexing stage's probe uses it to prove a version is findable before it is published.
    """
    query = query.strip()
    if not query or k <= 0:
        return []
    embedder = configured_embedder()
    entries = IndexEntry.objects.filter(tenant=tenant, embedder=embedder.name)
    if version is not None:
        entries = entries.filter(version_id=version)
    else:
        entries = entries.filter(Q(version_id=F("document__published_version_id")))
    rows = list(entries.values_list("pk", "vector"))
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(bytes(v) for _, v in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = matrix @ np.asarray(embedder.embed([query])[0], dtype=np.float32)
    order = np.argsort(-scores, kind="stable")[:k]
    minimum = float(settings.SEARCH_MIN_SCORE)
    picked = {rows[i][0]: float(scores[i]) for i in order if scores[i] > minimum}
    if not picked:
        return []
    found = {
        e.pk: e
        for e in IndexEntry.objects.filter(pk__in=picked).select_related("chunk", "version", "document")
    }
    return [_hit(found[pk], score, query) for pk, score in sorted(picked.items(), key=lambda p: -p[1])]


def _hit(entry: IndexEntry, score: float, query: str) -> SearchHit:
    chunk: Chunk = entry.chunk
    return SearchHit(
        document_id=entry.document_id,
        document_title=entry.document.title,
        version_id=entry.version_id,
        version=entry.version.number,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        ordinal=chunk.ordinal,
        snippet=snippet(chunk.text, query),
        score=round(score, 4),
    )


def query_terms(query: str) -> list[str]:
    """Words and CJK runs of a query, longest first (what a page highlights)."""
    terms = {t for t in re.findall(r"\w+", query.lower()) if len(t) > 1 or not t.isascii()}
    return sorted(terms, key=len, reverse=True)


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """A window of ``text`` around the first query term found (the start when none is)."""
    text = " ".join(text.split())
    lower = text.lower()
    positions = [p for p in (lower.find(t) for t in query_terms(query)) if p >= 0]
    start = max(0, min(positions) - width // 3) if positions else 0
    window = text[start : start + width]
    return ("…" if start > 0 else "") + window + ("…" if start + width < len(text) else "")
