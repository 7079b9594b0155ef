"""Running a labelled query set through the real search service and scoring the answers.

Used by the evaluation job kind (``documents/kinds/evaluate.py``) and by a re-index's gate
(``documents/kinds/reindex.py``): both walk the set a batch of queries at a time, search each
query in each mode with the run's embedder (scoped to the set's collection), and write the
batch's per-query rows in one fenced transaction, so a resume searches at most one batch again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings
from django.utils import timezone

from documents.evaluation import metrics
from documents.evaluation.labels import chunk_key, document_key, language_of
from documents.evaluation.models import EvaluationResult, EvaluationRun, LabelledQuery
from documents.models import Chunk, Tenant
from documents.retrieval import fusion
from documents.search import MODES, search

BATCH = 10  # queries per fenced write (each searched in every mode)
DEPTH = metrics.CUTOFF  # hits read per query and mode
ALL = "all"  # the summary's language key over every query


def configuration(embedder: str) -> dict[str, Any]:
    """What produced a run's figures: the embedder, the chunk sizes, the search settings, and the
    fusion module's constants (whatever it names: the ranks its scores are read at) and reranking."""
    fused = {
        name.lower(): value
        for name, value in vars(fusion).items()
        if name.isupper() and isinstance(value, str | int | float | bool)
    }
    return {
        "embedder": embedder,
        "embeddings_backend": settings.EMBEDDINGS_BACKEND,
        "chunk_target_tokens": settings.CHUNK_TARGET_TOKENS,
        "chunk_max_tokens": settings.CHUNK_MAX_TOKENS,
        "search_min_score": settings.SEARCH_MIN_SCORE,
        "fusion": fused,
        "reranking": any(name.startswith("rerank") and bool(value) for name, value in fused.items()),
    }


def answer_keys(tenant: Tenant, run: EvaluationRun, text: str, mode: str) -> list[set[str]]:
    """The label keys each hit matches, in rank order (a hit matches its document and chunk)."""
    hits = search(
        tenant,
        text,
        k=DEPTH,
        mode=mode,
        collection_ids=[run.query_set.collection_id],
        embedder_name=run.embedder,
    )
    chunk_ids = {
        (version_id, ordinal): pk
        for version_id, ordinal, pk in Chunk.objects.filter(
            version_id__in={h.version_id for h in hits}, ordinal__in={h.ordinal for h in hits}
        ).values_list("version_id", "ordinal", "pk")
    }
    return [
        {document_key(h.document_id), chunk_key(chunk_ids.get((h.version_id, h.ordinal), 0))} for h in hits
    ]


def pending(run: EvaluationRun, size: int = BATCH) -> list[LabelledQuery]:
    """The next queries of the run's set without results, in a stable order."""
    done = EvaluationResult.objects.filter(run=run).values("query_id")
    return list(
        LabelledQuery.objects.filter(query_set_id=run.query_set_id).exclude(pk__in=done).order_by("pk")[:size]
    )


def finished(run: EvaluationRun) -> int:
    return EvaluationResult.objects.filter(run=run).values("query_id").distinct().count()


def results_for(run: EvaluationRun, queries: list[LabelledQuery]) -> list[EvaluationResult]:
    """Unsaved result rows of ``queries`` in each of the run's modes (searches happen here, outside
    any transaction)."""
    tenant = Tenant.objects.get(pk=run.tenant_id)
    rows = []
    for query in queries:
        language = language_of(query.text, query.language)
        for mode in run.modes:
            keys = answer_keys(tenant, run, query.text, mode)
            rows.append(
                EvaluationResult(
                    run=run,
                    query=query,
                    query_text=query.text,
                    language=language,
                    mode=mode,
                    figures=metrics.score(keys, query.labels),
                    hits=[sorted(k) for k in keys],
                )
            )
    return rows


def run_through(
    run: EvaluationRun,
    *,
    check: Callable[[], None],
    write: Callable[[int, int], AbstractContextManager[Any]],
) -> None:
    """Search and score every query of the run not done yet, a batch per ``write(done, total)``
    (a fenced transaction in a job); ``check()`` is the safe point before each batch."""
    total = LabelledQuery.objects.filter(query_set_id=run.query_set_id).count()
    done = finished(run)
    for batch in _batches(run, check):
        rows = results_for(run, batch)
        done += len(batch)
        with write(done, max(total, done)):
            EvaluationResult.objects.bulk_create(rows, ignore_conflicts=True)


def _batches(run: EvaluationRun, check: Callable[[], None]) -> Iterator[list[LabelledQuery]]:
    while True:
        check()
        batch = pending(run)
        if not batch:
            return
        yield batch


def summarise(run: EvaluationRun) -> dict[str, dict[str, dict[str, float]]]:
    """``{mode: {language: {"queries": n, metric: mean}}}`` with an ``all`` language per mode."""
    grouped: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for mode, language, figures in EvaluationResult.objects.filter(run=run).values_list(
        "mode", "language", "figures"
    ):
        grouped[mode][language].append(figures)
        grouped[mode][ALL].append(figures)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in [m for m in MODES if m in grouped]:
        out[mode] = {}
        for language, rows in sorted(grouped[mode].items(), key=lambda item: (item[0] != ALL, item[0])):
            summary = metrics.mean(rows)
            out[mode][language] = {
                "queries": summary.queries,
                **{k: round(v, 4) for k, v in summary.figures.items()},
            }
    return out


def run_finish(run: EvaluationRun) -> None:
    """Store the run's summary (inside the commit that finishes its job)."""
    EvaluationRun.objects.filter(pk=run.pk).update(summary=summarise(run), finished_at=timezone.now())
