"""Evaluation runs through the engine in this process (both databases): a labelled set imported
from JSON Lines (all or nothing), a run's figures per mode and language, its configuration,
cancel leaves no figures, candidates count only once confirmed, and two runs compare."""

from __future__ import annotations

import json
from typing import Any

import pytest

from documents.evaluation.labels import LabelsInvalid
from documents.evaluation.metrics import paired_difference
from documents.evaluation.models import EvaluationResult, EvaluationRun, LabelledQuery
from documents.models import Chunk, Tenant
from documents.services.collections import default_collection
from documents.services.evaluation import (
    EvaluationRefused,
    candidate_confirm,
    candidate_record,
    evaluation_start,
    query_set_create,
    query_set_import,
    runs_compare,
)
from jobs.models import Status
from jobs.services.lifecycle import job_cancel
from tests.documents.helpers import make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = {
    "harbour.txt": "The harbour master logged every fishing boat that left before dawn.",
    "orchard.txt": "Apple trees in the orchard were pruned in late winter by the gardeners.",
    "invoice.txt": "Invoice 4711 lists the freight charges for the copper cable delivery.",
    "tea.txt": "绿茶在春天采摘，然后在锅里炒干。",  # noqa: RUF001
}


def ingest(tenant: Tenant, name: str, text: str) -> Any:
    result = upload(tenant, text.encode(), name)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return result.version.document_id


@pytest.fixture
def corpus(settings, tmp_path) -> tuple[Tenant, dict[str, Any]]:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("acme")
    ids = {name: ingest(tenant, name, text) for name, text in TEXTS.items()}
    return Tenant.objects.get(pk=tenant.pk), ids


def jsonl(*items: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(i, ensure_ascii=False) for i in items).encode()


def labelled(tenant: Tenant, ids: dict[str, Any]):
    query_set = query_set_create(collection=default_collection(tenant), name="smoke")
    chunk = Chunk.objects.filter(version__document_id=ids["invoice.txt"]).first()
    assert chunk is not None
    added = query_set_import(
        query_set=query_set,
        data=jsonl(
            {"query": "fishing boat harbour", "relevant": [str(ids["harbour.txt"])]},
            {"query": "apple trees pruned", "relevant": [str(ids["orchard.txt"])], "grades": [2]},
            {"query": "copper cable freight", "relevant": [chunk.pk], "language": "en"},
            {"query": "春天采摘", "relevant": [str(ids["tea.txt"])]},
        ),
    )
    assert added == 4
    return query_set


def test_a_run_scores_every_query_per_mode_and_language_and_records_its_configuration(corpus):
    tenant, ids = corpus
    query_set = labelled(tenant, ids)
    run = evaluation_start(query_set=query_set)
    assert run_until_idle(run.job.pk).status == Status.READY
    run = EvaluationRun.objects.get(pk=run.pk)
    assert set(run.summary) == {"hybrid", "semantic", "lexical"}
    hybrid = run.summary["hybrid"]
    assert hybrid["all"]["queries"] == 4
    assert {"cjk", "other", "en", "all"} == set(hybrid)
    # Every query names its own document in plain words: full text finds each first.
    assert run.summary["lexical"]["all"]["mrr@10"] == 1.0
    assert run.summary["lexical"]["all"]["recall@1"] == 1.0
    assert EvaluationResult.objects.filter(run=run).count() == 12
    assert run.config["embedder"] == tenant.active_embedder and "chunk_max_tokens" in run.config
    assert run.finished_at is not None


def test_import_is_all_or_nothing_and_names_the_bad_line(corpus):
    tenant, ids = corpus
    query_set = query_set_create(collection=default_collection(tenant), name="bad")
    good = {"query": "fishing boat", "relevant": [str(ids["harbour.txt"])]}
    cases = [
        (b'{"query": "x", "relevant": ["nope"]}', 1, "neither a document id"),
        (jsonl(good, {"query": "", "relevant": [1]}), 2, "'query' must be a non-empty string"),
        (jsonl(good, good, {"query": "y", "relevant": []}), 3, "'relevant' must be a non-empty list"),
        (jsonl(good, {"query": "y", "relevant": [1], "grades": [1, 2]}), 2, "'grades' must be a list"),
        (
            jsonl(good, {"query": "y", "relevant": [str(ids["tea.txt"])], "extra": 1}),
            2,
            "unknown field 'extra'",
        ),
        (b"\n" + jsonl(good) + b"\n{not json", 3, "not valid JSON"),
        (jsonl(good, {"query": "y", "relevant": ["00000000-0000-0000-0000-000000000001"]}), 2, "no document"),
        (jsonl({"query": "y", "relevant": [99999999]}), 1, "no chunk 99999999 in this collection"),
    ]
    for data, line, reason in cases:
        with pytest.raises(LabelsInvalid) as raised:
            query_set_import(query_set=query_set, data=data)
        assert raised.value.line == line and reason in raised.value.reason, (data, raised.value)
        assert LabelledQuery.objects.filter(query_set=query_set).count() == 0


def test_cancel_leaves_no_figures(corpus):
    tenant, ids = corpus
    run = evaluation_start(query_set=labelled(tenant, ids))
    job = job_cancel(job_id=run.job.pk)
    assert job.status == Status.CANCELLED
    assert EvaluationResult.objects.filter(run=run).count() == 0
    assert EvaluationRun.objects.get(pk=run.pk).summary == {}


def test_an_empty_set_and_an_unknown_mode_are_refused(corpus):
    tenant, ids = corpus
    empty = query_set_create(collection=default_collection(tenant), name="empty")
    with pytest.raises(EvaluationRefused, match="no queries"):
        evaluation_start(query_set=empty)
    with pytest.raises(EvaluationRefused, match="Modes are"):
        evaluation_start(query_set=labelled(tenant, ids), modes=["fuzzy"])


def test_candidates_are_labels_only_once_confirmed(corpus):
    tenant, ids = corpus
    query_set = query_set_create(collection=default_collection(tenant), name="from search")
    candidate = candidate_record(
        tenant=tenant, query="dawn boats", document_id=ids["harbour.txt"], chunk_id=None, verdict="relevant"
    )
    wrong = candidate_record(
        tenant=tenant, query="dawn boats", document_id=ids["orchard.txt"], chunk_id=None, verdict="wrong"
    )
    assert not LabelledQuery.objects.filter(query_set=query_set).exists()
    candidate_confirm(candidate=candidate, query_set=query_set)
    query = candidate_confirm(candidate=wrong, query_set=query_set)
    assert query.labels == {f"document:{ids['harbour.txt']}": 1, f"document:{ids['orchard.txt']}": 0}
    other = make_tenant("other")
    with pytest.raises(EvaluationRefused):  # another tenant's document is not found
        candidate_record(
            tenant=other, query="q", document_id=ids["harbour.txt"], chunk_id=None, verdict="wrong"
        )


def test_two_runs_compare_per_query(corpus):
    tenant, ids = corpus
    query_set = labelled(tenant, ids)
    runs = []
    for embedder in ("", "hashing:16"):
        run = evaluation_start(query_set=query_set, embedder=embedder, modes=["semantic"])
        assert run_until_idle(run.job.pk).status == Status.READY
        runs.append(EvaluationRun.objects.get(pk=run.pk))
    compared = runs_compare(runs[0], runs[1])
    assert len(compared["queries"]) == 4
    assert compared["wins"] + compared["losses"] + compared["ties"] == 4
    assert "semantic" in compared["deltas"]
    # Per mode and language, the mean change of MRR@10 with its 95 % interval, from the same
    # queries' rows; a language with one query has none (too few to tell).
    by_language: dict[str, list[dict[str, Any]]] = {}
    for row in compared["queries"]:
        by_language.setdefault(row["language"], []).append(row)
    assert sorted(len(rows) for rows in by_language.values()) == [1, 1, 2]
    expected = {}
    for language, rows in by_language.items():
        change = paired_difference([r["base"] for r in rows], [r["other"] for r in rows])
        if change is not None:
            expected[language] = {
                "queries": len(rows),
                "mean": round(change.mean, 4),
                "low": round(change.low, 4),
                "high": round(change.high, 4),
                "verdict": change.verdict,
            }
            assert expected[language]["mean"] == compared["deltas"]["semantic"][language]["mrr@10"]
    assert len(expected) == 1 and compared["intervals"] == {"semantic": expected}
