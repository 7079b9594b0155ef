"""A re-index gated on an evaluation, run through the engine in this process (both databases):
a worse embedder (hashing at 16 dimensions against the suite's 1024) is refused before the
switch, with the comparison stored and linked, the target's vectors removed and the active
embedder serving the same answers at every stage; one as good switches."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from documents.evaluation.models import EvaluationRun
from documents.kinds import REINDEX
from documents.models import ChunkVector, Tenant
from documents.search import search
from documents.services.collections import default_collection
from documents.services.evaluation import query_set_create, query_set_import
from documents.services.reindex import ReindexRefused, reindex_start
from jobs import pipelines
from jobs.models import Status
from tests.documents.helpers import make_tenant, run_until_idle, upload

pytestmark = pytest.mark.django_db(transaction=True)

OLD, WORSE = "hashing-v1-1024", "hashing-v1-16"
# Ten short documents nobody tuned to the embedders; each query uses words of its own document.
TEXTS = [
    ("harbour", "The harbour master logged every fishing boat that left before dawn."),
    ("orchard", "Apple trees in the orchard were pruned in late winter by the gardeners."),
    ("invoice", "Invoice 4711 lists the freight charges for the copper cable delivery."),
    ("volcano", "Lava from the volcano flowed into the valley and cooled into black basalt."),
    ("chess", "The grandmaster sacrificed a bishop to open the king's diagonal in the endgame."),
    ("bakery", "Sourdough bread rises overnight before the baker shapes loaves at sunrise."),
    ("glacier", "The glacier retreated two kilometres, leaving moraine and meltwater lakes."),
    ("violin", "A luthier carved the violin's spruce top and varnished the maple back."),
    ("comet", "Astronomers tracked the comet's icy tail as it swung around the sun."),
    ("beehive", "Worker bees fanned the hive to evaporate nectar into thick honey."),
]
QUERIES = {
    "harbour": "fishing boat dawn",
    "orchard": "pruned apple trees",
    "invoice": "copper cable freight",
    "volcano": "lava basalt valley",
    "chess": "bishop sacrificed endgame",
    "bakery": "sourdough loaves baker",
    "glacier": "glacier moraine meltwater",
    "violin": "spruce violin varnished",
    "comet": "comet icy tail",
    "beehive": "bees nectar honey",
}


@pytest.fixture
def tenant(settings, tmp_path) -> Tenant:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("acme")
    ids = {}
    for name, text in TEXTS:
        result = upload(tenant, text.encode(), f"{name}.txt")
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
        ids[name] = str(result.version.document_id)
    query_set = query_set_create(collection=default_collection(tenant), name="gate")
    lines = [json.dumps({"query": q, "relevant": [ids[name]]}) for name, q in QUERIES.items()]
    query_import = query_set_import(query_set=query_set, data="\n".join(lines).encode())
    assert query_import == len(QUERIES)
    tenant = Tenant.objects.get(pk=tenant.pk)
    tenant.gate_set = query_set  # type: ignore[attr-defined]
    return tenant


def answers(tenant: Tenant) -> dict[str, list[Any]]:
    tenant = Tenant.objects.get(pk=tenant.pk)
    return {q: [h.document_id for h in search(tenant, q, k=5, mode="semantic")] for q in QUERIES.values()}


def test_a_worse_embedder_is_refused_and_the_old_index_serves_throughout(tenant):
    before = answers(tenant)
    old_vectors = ChunkVector.objects.filter(embedder=OLD).count()
    original = pipelines.get(REINDEX)
    seen: list[str] = []

    def watched(stage: pipelines.Stage) -> pipelines.Handler:
        def run(ctx: Any) -> None:
            try:
                stage.handler(ctx)
            finally:
                seen.append(stage.name)
                state = Tenant.objects.get(pk=tenant.pk)
                assert state.active_embedder == OLD, stage.name
                assert answers(tenant) == before, stage.name

        return run

    pipelines.register(
        replace(original, stages=tuple(replace(s, handler=watched(s)) for s in original.stages))
    )
    try:
        job = reindex_start(
            tenant=tenant, embedder="hashing:16", query_set=str(tenant.gate_set.pk), margin=0.05
        )
        job = run_until_idle(job.pk)
    finally:
        pipelines.register(original)
    assert seen == ["plan", "embed", "gate"]
    assert (job.status, job.stage, job.error_code) == (Status.FAILED, "gate", "evaluation_worse")
    assert job.state_word() == "gate_failed"
    assert "keeps searching with its current embedder" in job.error_message
    state = Tenant.objects.get(pk=tenant.pk)
    assert (state.active_embedder, state.target_embedder) == (OLD, "")
    assert ChunkVector.objects.filter(embedder=WORSE).count() == 0
    assert ChunkVector.objects.filter(embedder=OLD).count() == old_vectors
    assert answers(tenant) == before
    runs = {r.embedder: r for r in EvaluationRun.objects.filter(gate_of=job.pk)}
    assert set(runs) == {OLD, WORSE}
    was, now = (runs[e].summary["semantic"]["all"]["mrr@10"] for e in (OLD, WORSE))
    assert now < was - 0.05, (was, now)


def test_an_embedder_as_good_passes_the_gate_and_switches(tenant):
    job = reindex_start(tenant=tenant, embedder="hashing:2048", query_set=str(tenant.gate_set.pk), margin=0.0)
    job = run_until_idle(job.pk)
    assert job.status == Status.READY, job.error_message
    runs = EvaluationRun.objects.filter(gate_of=job.pk)
    assert runs.count() == 2 and all(r.summary for r in runs)
    assert Tenant.objects.get(pk=tenant.pk).active_embedder == "hashing-v1-2048"


def test_a_gate_naming_another_workspace_set_or_a_bad_margin_is_refused(tenant):
    other = make_tenant("other")
    with pytest.raises(ReindexRefused) as refused:
        reindex_start(tenant=other, embedder="hashing:16", query_set=str(tenant.gate_set.pk))
    assert (refused.value.http_status, refused.value.code) == (400, "unknown_query_set")
    with pytest.raises(ReindexRefused) as refused:
        reindex_start(tenant=tenant, embedder="hashing:16", query_set=str(tenant.gate_set.pk), margin=2)
    assert refused.value.code == "invalid_margin"
    with pytest.raises(ReindexRefused) as refused:
        reindex_start(tenant=tenant, embedder="hashing:16", query_set="not-an-id")
    assert refused.value.code == "unknown_query_set"
