"""Re-index without going dark, run in this process through the engine (both databases): search
answers keep their membership between every stage and inside the switch's commit, the switch is
one commit and the old vectors go after it, a version uploaded mid-re-index gets both embedders'
vectors, a cancel leaves the active embedder serving, and a second re-index is refused.

The pair of embedders is the hashing one at 1024 and at 512 dimensions (two vector spaces).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from django.db import connection

from documents.kinds import REINDEX as KIND
from documents.models import ChunkVector, DocumentVersion, Tenant, WebhookMessage
from documents.search import search
from documents.services.reindex import ReindexRefused, reindex_start, retired_vectors_sweep
from documents.services.webhooks import webhook_endpoint_create
from documents.webhooks.delivery import deliver
from jobs import pipelines
from jobs.models import Job, StageRun, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import wait_for
from tests.documents.helpers import JobThread, make_tenant, paused_after, run_until_idle, upload
from tests.documents.webhook_receiver import Receiver, receiver, signature_valid

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "hashing-v1-1024", "hashing-v1-512"
TEXTS = {
    "harbour.txt": "The harbour master logged every fishing boat that left before dawn.",
    "orchard.txt": "Apple trees in the orchard were pruned in late winter by the gardeners.",
    "invoice.txt": "Invoice 4711 lists the freight charges for the copper cable delivery.",
}
QUERIES = ("fishing boat harbour", "orchard apple trees pruned", "freight invoice copper cable")


def ingest(tenant: Tenant, name: str, text: str) -> Any:
    result = upload(tenant, text.encode(), name)
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return result.version


def membership(tenant: Tenant) -> dict[tuple[str, str], set[Any]]:
    """Which documents each query finds, by meaning alone and hybrid."""
    tenant = Tenant.objects.get(pk=tenant.pk)
    return {
        (mode, query): {hit.document_id for hit in search(tenant, query, k=20, mode=mode)}
        for mode in ("semantic", "hybrid")
        for query in QUERIES
    }


def vectors(tenant: Tenant, embedder: str) -> int:
    return ChunkVector.objects.filter(version__document__tenant=tenant, embedder=embedder).count()


@contextmanager
def observed(seen: Callable[[str], None]) -> Iterator[None]:
    """The re-index kind with ``seen(point)`` called after each real stage handler and inside the
    switch's commit, right after the real publish hook (restored on exit)."""
    original = pipelines.get(KIND)

    def after(stage: pipelines.Stage) -> pipelines.Handler:
        def run(ctx: Any) -> None:
            stage.handler(ctx)
            seen(stage.name)

        return run

    def publish(job: Job) -> None:
        assert original.publish is not None
        original.publish(job)
        seen("switch commit")

    stages = tuple(replace(s, handler=after(s)) for s in original.stages)
    pipelines.register(replace(original, stages=stages, publish=publish))
    try:
        yield
    finally:
        pipelines.register(original)


@pytest.fixture
def hooks() -> Iterator[Receiver]:
    with receiver() as server:
        yield server


@pytest.fixture
def tenant(settings, tmp_path) -> Tenant:
    settings.MEDIA_ROOT = tmp_path / "media"
    tenant = make_tenant("acme")
    for name, text in TEXTS.items():
        ingest(tenant, name, text)
    return Tenant.objects.get(pk=tenant.pk)


def test_search_keeps_its_answers_through_a_reindex_that_switches_in_one_commit(tenant, settings, hooks):
    before = membership(tenant)
    assert all(before.values()) and tenant.active_embedder == OLD
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    endpoint = webhook_endpoint_create(tenant=tenant, url=hooks.url, events=["reindex.completed"])
    chunks = vectors(tenant, OLD)
    settings.EMBEDDING_BATCH_SIZE = 1  # a batch per chunk: progress and checkpoints per chunk
    points: list[str] = []

    def seen(point: str) -> None:
        points.append(point)
        assert membership(tenant) == before, point
        state = Tenant.objects.get(pk=tenant.pk)
        if point == "switch commit":  # inside the commit: switched, the old vectors still there
            assert (state.active_embedder, state.target_embedder) == (NEW, "")
            assert vectors(tenant, OLD) == chunks == vectors(tenant, NEW)
        else:
            assert (state.active_embedder, state.target_embedder) == (OLD, NEW)

    job = reindex_start(tenant=tenant, embedder="hashing:512")
    with observed(seen):
        finished = run_until_idle(job.pk)

    assert points == ["plan", "embed", "gate", "switch", "switch commit"]
    assert finished.status == Status.READY and finished.progress == 100.0
    assert (finished.processed, finished.total) == (chunks, chunks)
    state = Tenant.objects.get(pk=tenant.pk)
    assert (state.active_embedder, state.target_embedder, state.retired_embedder) == (NEW, "", OLD)
    # The old vectors outlive the switch by the grace (searches begun before it use them) ...
    assert retired_vectors_sweep(10) == [] and vectors(tenant, OLD) == chunks
    settings.REINDEX_RETIRE_GRACE_SECONDS = 0
    assert retired_vectors_sweep(10) == [tenant.pk]  # ... then the reaper's sweep removes them
    assert vectors(tenant, OLD) == 0 and vectors(tenant, NEW) == chunks
    assert Tenant.objects.get(pk=tenant.pk).retired_embedder == ""
    assert membership(tenant) == before
    message = WebhookMessage.objects.get(event_type="reindex.completed")
    deliver(str(message.pk))  # what the worker's task does with it
    (delivery,) = hooks.received
    assert signature_valid(endpoint.secret, delivery)
    assert delivery.json["type"] == "reindex.completed"
    assert delivery.json["data"] == {"job_id": str(job.pk), "embedder": NEW, "previous": OLD}


def test_a_version_uploaded_during_the_reindex_gets_both_and_is_found_after(tenant, settings):
    job = reindex_start(tenant=tenant, embedder="hashing:512")
    late = ingest(tenant, "kestrel.txt", "A kestrel hovered over the motorway verge at noon.")
    assert set(ChunkVector.objects.filter(version=late).values_list("embedder", flat=True)) == {OLD, NEW}

    assert run_until_idle(job.pk).status == Status.READY
    hits = search(Tenant.objects.get(pk=tenant.pk), "kestrel hovering", k=5, mode="semantic")
    assert hits and hits[0].version_id == late.pk


def test_a_cancel_leaves_the_active_embedder_serving_and_drops_the_target(tenant, settings):
    before = membership(tenant)
    settings.EMBEDDING_BATCH_SIZE = 1
    job = reindex_start(tenant=tenant, embedder="hashing:512")

    def seen(point: str) -> None:
        if point == "plan":
            job_cancel(job_id=job.pk, reason="operator changed their mind")

    with observed(seen):
        finished = run_until_idle(job.pk)

    assert finished.status == Status.CANCELLED
    state = Tenant.objects.get(pk=tenant.pk)
    assert (state.active_embedder, state.target_embedder) == (OLD, "")
    assert vectors(tenant, NEW) == 0 and vectors(tenant, OLD) > 0
    assert membership(tenant) == before
    later = ingest(tenant, "late.txt", "Late uploads are embedded with the active embedder only.")
    assert set(ChunkVector.objects.filter(version=later).values_list("embedder", flat=True)) == {OLD}


def test_a_second_reindex_of_the_tenant_is_refused_while_one_runs(tenant):
    reindex_start(tenant=tenant, embedder="hashing:512")
    with pytest.raises(ReindexRefused) as refused:
        reindex_start(tenant=tenant, embedder="hashing:256")
    assert (refused.value.http_status, refused.value.code) == (409, "reindex_running")
    with pytest.raises(ReindexRefused) as same:
        reindex_start(tenant=make_tenant("other"), embedder=OLD)
    assert same.value.code == "already_active"
    with pytest.raises(ReindexRefused) as unknown:
        reindex_start(tenant=tenant, embedder="no-such-model")
    assert (unknown.value.http_status, unknown.value.code) == (400, "unknown_embedder")


def test_changing_the_configured_embedder_keeps_existing_tenants_searching(tenant, settings):
    from documents.embedders import configured_embedder

    before = membership(tenant)
    settings.EMBEDDINGS_HASHING_DIMENSION = 512
    configured_embedder.cache_clear()
    try:
        assert configured_embedder().name == NEW
        assert membership(tenant) == before  # still its active (1024) vectors
        newcomer = make_tenant("newcomer")
        version = ingest(newcomer, "a.txt", TEXTS["harbour.txt"])
        assert set(ChunkVector.objects.filter(version=version).values_list("embedder", flat=True)) == {NEW}
        late = ingest(tenant, "b.txt", "Copper cable freight again.")
        assert set(ChunkVector.objects.filter(version=late).values_list("embedder", flat=True)) == {OLD}
    finally:
        configured_embedder.cache_clear()


def test_a_searcher_beside_the_reindex_never_gets_an_empty_or_different_answer(tenant, settings):
    """Another connection searches without pause while the job runs in this one: every answer
    has the same documents, from before the switch's commit to after it (it sees both
    embedders active in turn)."""
    before = membership(tenant)
    settings.EMBEDDING_BATCH_SIZE = 1
    job = reindex_start(tenant=tenant, embedder="hashing:512")
    same: list[bool] = []
    actives: set[str] = set()
    errors: list[BaseException] = []
    searching, stop = threading.Event(), threading.Event()

    def searcher() -> None:
        try:
            while True:
                last = stop.is_set()
                actives.add(Tenant.objects.get(pk=tenant.pk).active_embedder)
                same.append(membership(tenant) == before)
                searching.set()
                if last:
                    return
        except BaseException as exc:
            errors.append(exc)
            searching.set()
        finally:
            connection.close()

    thread = threading.Thread(target=searcher, daemon=True)
    thread.start()
    assert searching.wait(30)
    assert run_until_idle(job.pk).status == Status.READY
    stop.set()
    thread.join(60)
    assert not errors, errors
    assert len(same) >= 2 and all(same)
    assert actives == {OLD, NEW}
    settings.REINDEX_RETIRE_GRACE_SECONDS = 0
    assert retired_vectors_sweep(10) == [tenant.pk] and vectors(tenant, OLD) == 0
    assert membership(tenant) == before


def test_a_version_embedded_before_the_switch_and_published_after_gets_the_new_vectors(tenant, settings):
    """Its ingestion job waits between indexing and publishing while a whole re-index runs: the
    publish refuses it (no vector of the now active embedder), and the indexing stage's retry
    embeds it, then publishes."""
    result = upload(tenant, b"A heron waited motionless in the reed bed by the weir.", "heron.txt")
    assert result.job is not None
    with paused_after("indexing") as gate:
        worker = JobThread(result.job.pk)
        worker.start()
        gate.wait_reached()
        embedders = ChunkVector.objects.filter(version=result.version).values_list("embedder", flat=True)
        assert set(embedders) == {OLD}
        job = reindex_start(tenant=tenant, embedder="hashing:512")
        assert run_until_idle(job.pk).status == Status.READY
        gate.release.set()
        worker.finish()
    assert Job.objects.get(pk=result.job.pk).status != Status.READY
    runs = StageRun.objects.filter(job_id=result.job.pk, stage="indexing").order_by("started_at")
    assert [run.error_code for run in runs] == ["vectors_missing"]  # the publish refused it

    wait_for(lambda: run_until_idle(result.job.pk).status == Status.READY, timeout=30, what="published")
    assert set(embedders.all()) == {OLD, NEW}  # the retry added the new embedder's
    assert [run.error_code for run in runs.all()] == ["vectors_missing", ""]
    hits = search(Tenant.objects.get(pk=tenant.pk), "heron reed weir", k=3, mode="semantic")
    assert hits and hits[0].version_id == result.version.pk


def test_after_a_reindex_the_same_bytes_are_cut_anew_for_the_new_embedder_not_copied(tenant, settings):
    # Dedup copies a published version's outputs for the same bytes made with the same settings:
    # the workspace's embedder is one of them, whatever the deployment's configured one is.
    text = "The lock keeper opened the upper gates when the barge signalled twice."
    first = ingest(tenant, "lock.txt", text)
    again = ingest(tenant, "lock-again.txt", text)
    assert again.reused_from_id == first.pk  # same embedder: copied, not processed

    assert run_until_idle(reindex_start(tenant=tenant, embedder="hashing:512").pk).status == Status.READY
    tenant = Tenant.objects.get(pk=tenant.pk)  # as the next request loads it
    assert tenant.active_embedder == NEW
    after = ingest(tenant, "lock-after.txt", text)
    assert after.reused_from_id is None  # cut and embedded for the new embedder
    cut_for = dict(DocumentVersion.objects.filter(pk__in=[first.pk, after.pk]).values_list("pk", "chunking"))
    assert (cut_for[first.pk]["tokens_of"], cut_for[after.pk]["tokens_of"]) == (OLD, NEW)
    assert set(ChunkVector.objects.filter(version=after).values_list("embedder", flat=True)) == {NEW}
    # Made for the new embedder, it is the one the same bytes copy from now on.
    assert ingest(tenant, "lock-last.txt", text).reused_from_id == after.pk
