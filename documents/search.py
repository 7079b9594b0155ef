"""Hybrid search over a tenant's published versions: full-text and dense rankings, fused.

``mode`` picks the lists: ``lexical`` (BM25-class full text), ``semantic`` (the tenant's active
embedder's cosine similarity) or ``hybrid`` (both, fused by their scores, each list counted as far
as it is clear about its winner: ``documents.retrieval.fusion``; the default). The weights are the
collection's (``text_weight``, ``embedding_weight``) or the caller's; the dense list's weight is
further scaled, per query, by how far it can be trusted
(``documents.retrieval.fusion.dense_confidence``: whether the embedder reads the query's script,
how far its best neighbour stands above the model's noise level), and that noise level is the
dense list's floor in the fusion (a cosine there stands at 0); how clear a list is about its
winner is measured as the embedder says (its ``fusion_separation``). Each hit carries the fused
score, normalised to 0-1 so one threshold means the same in every query, and the rank and score
it had in each list. No similarity cut can hide a full-text match: the only floor (the
embedder's ``similarity_floor``, or ``SEARCH_MIN_SCORE`` when set) drops dense candidates that
share nothing with the query (a cosine at the model's noise level), never a lexical one. Where
the rankings run (SQLite FTS5 + sqlite-vec, PostgreSQL full text + pgvector or its fallback) is
``documents.retrieval.backends``."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from documents.causes import EMBEDDER_UNAVAILABLE
from documents.embedders import buildable, embedder_for, tenant_embedder_name
from documents.embedders.base import embed_queries
from documents.models import Collection, IndexEntry, Tenant
from documents.principals import Viewer
from documents.retrieval import backends
from documents.retrieval.filters import Filter, filter_sql
from documents.retrieval.fusion import SHIPPED, Weights, dense_confidence, fuse
from documents.retrieval.index import search_index
from documents.retrieval.text import highlight_spans, highlight_terms, query_tokens
from jobs.errors import StageFailure

SNIPPET_CHARS = 280
log = logging.getLogger(__name__)

MODES = ("hybrid", "semantic", "lexical")
# How many candidates each list brings to the fusion, at least (more when ``k`` is larger).
DENSE_CANDIDATES = 50


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
    heading_path: list[str] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    # Per list ("lexical", "semantic"): the hit's rank there (1 = first) and its score there.
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


def search(
    tenant: Tenant,
    query: str,
    k: int = 10,
    *,
    mode: str = "hybrid",
    version: Any = None,
    document_ids: Sequence[uuid.UUID] | None = None,
    collection_ids: Sequence[uuid.UUID] | None = None,
    filters: Filter | None = None,
    where: Sequence[tuple[str, Sequence[Any]]] = (),
    embedder_name: str = "",
    weights: Weights | None = None,
    min_score: float = 0.0,
    viewer: Viewer | None = None,
) -> list[SearchHit]:
    """The ``k`` best chunks for ``query`` in ``tenant``'s published versions.

    With ``version`` the search is restricted to that one version, published or not: the
    indexing stage's probe uses it to prove a version is findable before it is published.
    ``document_ids`` restricts it to those documents, ``collection_ids`` to documents of those
    collections (another tenant's ids match nothing: the tenant condition holds), ``filters``
    (``parse_filter``'s result) to documents whose attributes match, and ``where`` adds raw SQL
    conditions over the document row (alias ``d``). All of them run inside the index queries,
    never after them. ``embedder_name`` ranks by meaning with that embedder's vectors instead of
    the active one's (an evaluation gating a re-index compares the two before the switch).

    ``viewer`` limits hits to the documents that caller may see (their principal keys go into
    every ranking's query); every search on a person's behalf passes it. Without it nothing is
    limited by access lists: the platform's own searches (the indexing probe, evaluations).

    ``weights`` (hybrid only) default to those of the one collection searched, else equal;
    ``min_score`` drops hits whose fused score (0-1) is under it.
    """
    query = query.strip()
    if not query or k <= 0:
        return []
    if mode not in MODES:
        raise ValueError(f"unknown search mode {mode!r}")
    if viewer is not None and viewer.tenant_id != tenant.pk:
        raise ValueError("the viewer belongs to another tenant")
    # The tenant's active embedder, not the configured one: a settings change must not empty
    # search; a re-index switches it (documents/kinds/reindex.py). One this deployment cannot build
    # (``documents.W003``) leaves full text answering, as when the embedding provider is down.
    name = embedder_name or tenant_embedder_name(tenant)
    embedder = buildable(name) if version is None else embedder_for(name)  # the probe: its stage's cause
    if embedder is None:
        if mode == "semantic":
            raise SearchUnavailable(EMBEDDER_UNAVAILABLE.code)
        log.warning("tenant %s: embedder %r cannot be built here; answering from full text", tenant.pk, name)
    conditions = list(where)
    if filters is not None:
        conditions.append(filter_sql(filters, connection.vendor, "d.attributes"))
    scope = backends.Scope(
        tenant_id=tenant.pk,
        embedder=embedder.name if embedder is not None else name,
        version_id=uuid.UUID(str(version)) if version is not None else None,
        document_ids=document_ids,
        collection_ids=collection_ids,
        where=tuple(conditions),
        principals=viewer.principals if viewer is not None else None,
    )
    tokens = query_tokens(query)
    lists: dict[str, backends.Ranked] = {}
    lexical: Future[backends.Ranked] | None = None
    if mode in ("hybrid", "lexical"):
        limit = max(k, backends.LEXICAL_CANDIDATES)
        if mode == "hybrid" and version is None and _concurrent():
            lexical = _side_threads().submit(_on_own_connection, search_index().lexical, scope, tokens, limit)
        else:
            lists["lexical"] = search_index().lexical(scope, tokens, limit)
    semantic = None
    confidence: dict[str, float] = {}
    floors: dict[str, float] = {}
    if mode in ("hybrid", "semantic") and embedder is not None:
        try:
            semantic = _dense(
                embedder, scope, query, tokens, k, hybrid=mode == "hybrid", probe=version is not None
            )
        except BaseException:
            if lexical is not None:
                wait([lexical])  # its connection is given back before this search's error goes up
            raise
    if lexical is not None:
        lists["lexical"] = lexical.result()
    if semantic is not None:  # after the full text, whichever finished first: fusion breaks ties by order
        lists["semantic"], confidence["semantic"], floors["semantic"] = semantic
    if weights is None and mode == "hybrid":
        weights = collection_weights(tenant, collection_ids)
    # How clear each list is, measured as the embedder says (its scale of cosines decides it).
    separation = getattr(embedder, "fusion_separation", SHIPPED)
    fused = fuse(lists, k, weights=weights, confidence=confidence, floors=floors, separation=separation)
    fused = [f for f in fused if f.score >= min_score]
    return _hits(tenant, fused, query)


def collection_weights(tenant: Tenant, collection_ids: Sequence[uuid.UUID] | None) -> Weights:
    """The hybrid weights of the collections searched when they all agree (one collection, or
    several set alike), else equal weights."""
    if not collection_ids:
        return Weights()
    found = set(
        Collection.objects.filter(tenant=tenant, pk__in=list(collection_ids)).values_list(
            "text_weight", "embedding_weight"
        )
    )
    if len(found) != 1:
        return Weights()
    text, embedding = found.pop()
    return Weights(text=text, embedding=embedding)


def _dense(
    embedder: Any, scope: backends.Scope, query: str, tokens: list[str], k: int, *, hybrid: bool, probe: bool
) -> tuple[backends.Ranked, float, float] | None:
    """The ranking by meaning, how far it can be trusted for this query (0-1) and its floor (the
    cosine of the model's noise level); None when a hybrid search's query could not be embedded
    (it then answers from full text alone)."""
    try:
        vector = np.asarray(embed_queries(embedder, [query])[0], dtype=np.float32)
    except StageFailure as failure:
        if probe:
            raise  # the probe: the indexing stage retries or fails by the cause's policy
        if not hybrid:
            raise SearchUnavailable(failure.cause) from failure
        # A user's hybrid search still answers from the word list while the embedding
        # provider is down, instead of failing as a whole.
        log.warning("query embedding failed (%s): answering from full text only", failure.cause)
        return None
    floor = settings.SEARCH_MIN_SCORE
    if floor < 0:  # unset: the embedder's own noise level
        floor = float(getattr(embedder, "similarity_floor", 0.0))
    nearest = search_index().dense(scope, vector, max(k, DENSE_CANDIDATES), tokens=tokens)
    ranked = [(i, s) for i, s in nearest if s > floor]
    confidence = dense_confidence(
        query,
        ranked[0][1] if ranked else None,
        floor=floor,
        confident=float(getattr(embedder, "similarity_confident", floor)),
        reads_cjk=bool(getattr(embedder, "reads_cjk", True)),
    )
    return ranked, confidence, floor


# The full-text side of concurrent hybrid searches: threads of this process, each with its own
# database connection for the length of one ranking (the web server's pool has room for one per
# request thread, config/settings.py). The indexing stage's probe of one version runs inline.
SIDE_THREADS = 4
_side: ThreadPoolExecutor | None = None
_side_lock = threading.Lock()


def _concurrent() -> bool:
    """Whether a hybrid search may rank full text on another connection: PostgreSQL (SQLite's
    rankings share one file and one process's CPU; nothing to win), and not inside a
    transaction, whose snapshot and uncommitted rows another connection would not see."""
    return settings.SEARCH_CONCURRENT and connection.vendor == "postgresql" and not connection.in_atomic_block


def _side_threads() -> ThreadPoolExecutor:
    global _side
    with _side_lock:
        if _side is None:
            _side = ThreadPoolExecutor(max_workers=SIDE_THREADS, thread_name_prefix="search-fulltext")
        return _side


def _on_own_connection(fn: Callable[..., backends.Ranked], *args: Any) -> backends.Ranked:
    """``fn(*args)`` on this thread's own connection, given back when it returns (to the pool
    when the web server pools them), so no connection outlives its search."""
    try:
        return fn(*args)
    finally:
        connection.close()


class SearchUnavailable(Exception):
    """A search by meaning could not embed its query (the embedding provider failed)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


def _hits(tenant: Tenant, fused: Sequence[Any], query: str) -> list[SearchHit]:
    if not fused:
        return []
    entries = IndexEntry.objects.select_related("chunk", "version", "document").in_bulk(
        [f.key for f in fused]
    )
    return [_hit(entries[f.key], f.score, f.ranks, f.scores, query) for f in fused if f.key in entries]


def _hit(
    entry: IndexEntry, score: float, ranks: dict[str, int], scores: dict[str, float], query: str
) -> SearchHit:
    chunk = entry.chunk
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
        heading_path=list(chunk.heading_path or []),
        attributes=dict(entry.document.attributes or {}),
        ranks=dict(ranks),
        scores={name: round(value, 4) for name, value in scores.items()},
    )


def query_terms(query: str) -> list[str]:
    """What a page highlights of a query, longest first (:func:`highlight_terms`)."""
    return highlight_terms(query)


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """A window of ``text`` around the first query term found (the start when none is)."""
    text = " ".join(text.split())
    spans = highlight_spans(text, query)
    start = max(0, spans[0][0] - width // 3) if spans else 0
    window = text[start : start + width]
    return ("…" if start > 0 else "") + window + ("…" if start + width < len(text) else "")
