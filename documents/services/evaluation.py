"""Use cases of retrieval evaluation (docs/evaluation.md): labelled query sets, their import,
candidates from the search page, starting a run, and comparing two runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

from documents.embedders import UnknownEmbedder, embedder_for, tenant_embedder_name
from documents.evaluation.labels import LabelsInvalid, ParsedQuery, chunk_key, document_key, parse_jsonl
from documents.evaluation.metrics import paired_difference
from documents.evaluation.models import (
    EvaluationResult,
    EvaluationRun,
    LabelCandidate,
    LabelledQuery,
    LabelledQuerySet,
    Verdict,
)
from documents.kinds import EVALUATE as KIND
from documents.models import Chunk, Collection, Document, Tenant
from documents.search import MODES
from jobs.models import Actor, Job
from jobs.services.lifecycle import job_create


class EvaluationRefused(Exception):
    """Bad input for an evaluation use case, with a user-safe code, message and HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.http_status = status
        self.code = code
        self.message = message


def query_set_create(*, collection: Collection, name: str, description: str = "") -> LabelledQuerySet:
    """A new, empty labelled query set of ``collection``."""
    name = name.strip()
    if not name:
        raise EvaluationRefused(400, "invalid_name", gettext_noop("A query set needs a name."))
    return LabelledQuerySet.objects.create(
        tenant_id=collection.tenant_id, collection=collection, name=name[:200], description=description
    )


def query_set_import(
    *, query_set: LabelledQuerySet, data: bytes, visible: QuerySet[Document] | None = None
) -> int:
    """Add the queries of a JSON Lines upload to ``query_set``; how many. All or nothing: the
    first bad line (or an id that is not a document or chunk of the set's collection, among
    ``visible``, the documents the importer may see, when given) raises ``LabelsInvalid``
    naming the line, and nothing is added."""
    parsed = parse_jsonl(data)
    _check_ids(query_set, parsed, Document.objects.all() if visible is None else visible)
    with transaction.atomic():
        LabelledQuery.objects.bulk_create(
            [
                LabelledQuery(query_set=query_set, text=q.text, language=q.language, labels=q.labels)
                for q in parsed
            ]
        )
    return len(parsed)


def _check_ids(query_set: LabelledQuerySet, parsed: list[ParsedQuery], visible: QuerySet[Document]) -> None:
    # An id the importer may not see is refused as one that does not exist: a label would
    # otherwise confirm it (and later show its queries' figures to its importer).
    wanted = {key for q in parsed for key in q.labels}
    documents = {
        document_key(pk)
        for pk in visible.filter(
            collection_id=query_set.collection_id,
            deleted_at=None,
            pk__in=[k.split(":", 1)[1] for k in wanted if k.startswith("document:")],
        ).values_list("pk", flat=True)
    }
    chunks = {
        chunk_key(pk)
        for pk in Chunk.objects.filter(
            version__document__in=visible.filter(collection_id=query_set.collection_id),
            pk__in=[int(k.split(":", 1)[1]) for k in wanted if k.startswith("chunk:")],
        ).values_list("pk", flat=True)
    }
    known = documents | chunks
    for query in parsed:
        unknown = next((k for k in query.labels if k not in known), None)
        if unknown is not None:
            kind, value = unknown.split(":", 1)
            raise LabelsInvalid(query.line, f"no {kind} {value} in this collection")


def candidate_record(
    *,
    tenant: Tenant,
    query: str,
    document_id: Any,
    verdict: str,
    chunk_id: int | None = None,
    user: Any = None,
) -> LabelCandidate:
    """A searcher's verdict on a hit, kept until an operator confirms it (unused before)."""
    if verdict not in Verdict.values:
        raise EvaluationRefused(
            400, "invalid_verdict", gettext_noop("The verdict must be relevant or wrong.")
        )
    if not query.strip():
        raise EvaluationRefused(400, "invalid_query", gettext_noop("The query is empty."))
    document = Document.objects.filter(tenant=tenant, pk=document_id, deleted_at=None).first()
    if document is None:
        raise EvaluationRefused(404, "not_found", gettext_noop("Not found."))
    if chunk_id is not None and not Chunk.objects.filter(pk=chunk_id, version__document=document).exists():
        chunk_id = None
    return LabelCandidate.objects.create(
        tenant=tenant,
        collection_id=document.collection_id,
        query=query.strip()[:2000],
        document_id=document.pk,
        chunk_id=chunk_id,
        verdict=verdict,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def candidate_confirm(
    *, candidate: LabelCandidate, query_set: LabelledQuerySet | None = None
) -> LabelledQuery:
    """Make a candidate a label: of the query with the same text in ``query_set`` (default: the
    collection's newest set, or a new "From search" set), grade 1 for relevant, 0 for wrong."""
    with transaction.atomic():
        # The candidate row is the lock: two operators confirming it add the label once.
        candidate = LabelCandidate.objects.select_for_update().get(pk=candidate.pk)
        if query_set is None:
            query_set = LabelledQuerySet.objects.filter(collection_id=candidate.collection_id).first()
            if query_set is None:
                query_set = LabelledQuerySet.objects.create(
                    tenant_id=candidate.tenant_id, collection_id=candidate.collection_id, name="From search"
                )
        query, _ = LabelledQuery.objects.get_or_create(query_set=query_set, text=candidate.query)
        key = chunk_key(candidate.chunk_id) if candidate.chunk_id else document_key(candidate.document_id)
        labels = dict(query.labels)
        labels[key] = 1 if candidate.verdict == Verdict.RELEVANT else 0
        LabelledQuery.objects.filter(pk=query.pk).update(labels=labels)
        if candidate.confirmed_at is None:
            LabelCandidate.objects.filter(pk=candidate.pk).update(
                confirmed_at=timezone.now(), confirmed_into=query_set
            )
    query.refresh_from_db()
    return query


def evaluation_start(
    *,
    query_set: LabelledQuerySet,
    embedder: str = "",
    modes: list[str] | None = None,
    actor: Actor = Actor.USER,
    actor_name: str = "",
) -> EvaluationRun:
    """Start an evaluation job of ``query_set`` (default: the tenant's active embedder, every
    mode). Refused (400) for an empty set, an unknown mode or embedder."""
    from documents.evaluation.runner import configuration

    tenant = Tenant.objects.get(pk=query_set.tenant_id)
    modes = list(modes or MODES)
    if any(m not in MODES for m in modes):
        raise EvaluationRefused(400, "invalid_mode", gettext_noop("Modes are lexical, semantic and hybrid."))
    try:
        name = embedder_for(embedder).name if embedder else tenant_embedder_name(tenant)
    except (UnknownEmbedder, ValueError):
        raise EvaluationRefused(
            400, "unknown_embedder", gettext_noop("No embedder of that name is available.")
        ) from None
    if not query_set.queries.exists():
        raise EvaluationRefused(400, "empty_query_set", gettext_noop("The query set has no queries yet."))
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            tenant=tenant, query_set=query_set, embedder=name, modes=modes, config=configuration(name)
        )
        job = job_create(
            kind=KIND,
            tenant=tenant.slug,
            subject_id=str(run.pk),
            payload={"run_id": str(run.pk), "tenant_id": tenant.pk},
            actor=actor,
            actor_name=actor_name,
            reason="evaluation requested",
        )
        EvaluationRun.objects.filter(pk=run.pk).update(job=job)
    run.job = job
    return run


def run_job(run: EvaluationRun) -> Job | None:
    return Job.objects.filter(pk=run.job_id).first() if run.job_id else None


# --- comparing two runs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryOutcome:
    query: str
    mode: str
    language: str
    before: float
    after: float

    @property
    def outcome(self) -> str:
        return "win" if self.after > self.before else "loss" if self.after < self.before else "tie"


def runs_compare(
    base: EvaluationRun,
    other: EvaluationRun,
    metric: str = "mrr@10",
    shown: Callable[[Iterable[Any]], set[Any]] | None = None,
) -> dict[str, Any]:
    """``other`` against ``base``: the summary deltas per mode and language, each with the 95 %
    interval of ``metric``'s mean change over the queries both runs answered and whether the
    change is clear of that noise (``metrics.paired_difference``), and per query and mode whether
    ``other`` won, lost or tied on ``metric``. With ``shown`` (query ids to the ones the reader
    may see: ``selectors.queries_in_sight``) the per-query rows and their wins, losses and ties
    are those queries' only; the deltas and intervals stay the whole set's figures."""
    rows = {
        (r.query_id, r.mode): r
        for r in EvaluationResult.objects.filter(run=base).only("query_id", "mode", "figures")
    }
    results = list(EvaluationResult.objects.filter(run=other).order_by("query_id", "mode"))
    allowed = None if shown is None else shown({r.query_id for r in results if r.query_id is not None})
    outcomes = []
    pairs: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for result in results:
        mine = rows.get((result.query_id, result.mode))
        if mine is None:
            continue
        paired = pairs.setdefault((result.mode, result.language), ([], []))
        paired[0].append(mine.figures[metric])
        paired[1].append(result.figures[metric])
        if allowed is not None and result.query_id not in allowed:
            continue
        outcomes.append(
            QueryOutcome(
                result.query_text, result.mode, result.language, mine.figures[metric], result.figures[metric]
            )
        )
    deltas: dict[str, dict[str, dict[str, float]]] = {}
    for mode, languages in other.summary.items():
        for language, figures in languages.items():
            was = base.summary.get(mode, {}).get(language)
            if was:
                deltas.setdefault(mode, {})[language] = {
                    k: round(v - was[k], 4) for k, v in figures.items() if k != "queries" and k in was
                }
    intervals: dict[str, dict[str, dict[str, Any]]] = {}
    for (mode, language), (before, after) in sorted(pairs.items()):
        change = paired_difference(before, after)
        if change is not None:
            intervals.setdefault(mode, {})[language] = {
                "queries": change.queries,
                "mean": round(change.mean, 4),
                "low": round(change.low, 4),
                "high": round(change.high, 4),
                "verdict": change.verdict,
            }
    return {
        "metric": metric,
        "deltas": deltas,
        "intervals": intervals,
        "wins": sum(o.outcome == "win" for o in outcomes),
        "losses": sum(o.outcome == "loss" for o in outcomes),
        "ties": sum(o.outcome == "tie" for o in outcomes),
        "queries": [
            {
                "query": o.query,
                "mode": o.mode,
                "language": o.language,
                "base": round(o.before, 4),
                "other": round(o.after, 4),
                "outcome": o.outcome,
            }
            for o in outcomes
        ],
    }
