"""A re-index on a real django-q2 cluster and reaper, to the default model (all-MiniLM-L6-v2)
from the hashing embedder: a worker SIGKILLed mid-embed is taken over and resumes where its
committed batches end; search answers the same documents before, during and after the kill, and
after the switch every document is still found, by words and by meaning.

Leases are 8 s (the suite's are 3: ``env`` says why) and the reaper passes every 0.5 s; the model
embeds a few chunks per second here, in batches of 4, so the kill lands in the middle.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from documents.models import ChunkVector, Tenant
from documents.search import search
from documents.services.reindex import reindex_start
from jobs.models import JobEvent, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.documents.helpers import make_tenant, reload_job, run_until_idle, upload

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

OLD, NEW = "hashing-v1-1024", "local-all-minilm-l6-v2-v1-384"
TOPICS = {
    "harbour": "fishing boats left the harbour before dawn while the harbour master counted nets",
    "orchard": "gardeners pruned the apple trees of the orchard in late winter frost",
    "invoice": "the invoice lists freight charges for copper cable delivered by rail",
}


def membership(tenant: Tenant, mode: str = "hybrid") -> dict[str, set[Any]]:
    tenant = Tenant.objects.get(pk=tenant.pk)
    return {
        topic: {hit.document_id for hit in search(tenant, text, k=50, mode=mode)}
        for topic, text in TOPICS.items()
    }


@pytest.fixture
def env(subprocess_env: dict[str, str], settings, tmp_path: Path) -> dict[str, str]:
    settings.MEDIA_ROOT = tmp_path / "media"
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "EMBEDDING_BATCH_SIZE": "4",
        "JOBS_PROGRESS_EVENT_SECONDS": "0",
        "REINDEX_RETIRE_GRACE_SECONDS": "0",  # the reaper removes the old vectors at its next pass
        # A lease of 8 s, not the suite's 3: the model's embedding beside other test workers once
        # kept a worker's heartbeats (every 0.5 s) away for over 3 s, and the worker that took
        # over was itself taken over. The kill is still found in 8 s.
        "JOBS_LEASE_SECONDS": "8",
    }


def test_a_worker_killed_mid_embed_is_taken_over_and_search_never_goes_dark(
    processes: Processes, env: dict[str, str], settings
):
    settings.CHUNK_TARGET_TOKENS, settings.CHUNK_MAX_TOKENS = 24, 32  # many small chunks
    tenant = make_tenant("acme")
    documents = {}
    for topic, text in TOPICS.items():
        body = "\n\n".join(f"Paragraph {n}: {text}, note {n}." for n in range(20))
        result = upload(tenant, body.encode(), f"{topic}.txt")
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
        documents[topic] = result.version.document_id
    chunks = ChunkVector.objects.filter(embedder=OLD).count()
    assert chunks >= 40
    before, lexical = membership(tenant), membership(tenant, "lexical")
    assert all(before[topic] >= {documents[topic]} for topic in TOPICS)

    job = reindex_start(tenant=tenant, embedder="local")
    processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    wait_for(lambda: ChunkVector.objects.filter(embedder=NEW).count() >= 8, timeout=90, what="8 chunks")
    run = StageRun.objects.get(job=job, stage="embed", outcome=StageRun.Outcome.RUNNING)
    pid = int(run.worker_name.rsplit(":", 1)[1])
    os.kill(pid, signal.SIGKILL)
    saved = ChunkVector.objects.filter(embedder=NEW).count()
    assert saved < chunks - 8, "embedding was too fast to kill in the middle"
    assert membership(tenant) == before  # the old vectors serve; nothing half-switched

    wait_for(lambda: reload_job(job).status in (Status.READY, Status.FAILED), timeout=180, what="ready")
    job = reload_job(job)
    assert job.status == Status.READY, processes.logs()
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert ("take_over", "reaper") in names
    embed_runs = list(StageRun.objects.filter(job=job, stage="embed").order_by("started_at"))
    # The killed run is lost and one run ends the stage; a taking-over worker that misses its
    # lease on a loaded machine is lost in its turn, never advanced twice.
    outcomes = [r.outcome for r in embed_runs]
    assert outcomes[0] == "lost" and outcomes[-1] == "advanced" and set(outcomes[1:-1]) <= {"lost"}, outcomes
    take_over = JobEvent.objects.get(job=job, name="take_over")
    resumed_at = (
        JobEvent.objects.filter(job=job, pk__gt=take_over.pk, name="progress", stage="embed")
        .order_by("pk")
        .values_list("processed", flat=True)
        .first()
    )
    assert resumed_at is not None and resumed_at >= saved  # it went on from the committed batches

    state = Tenant.objects.get(pk=tenant.pk)
    assert (state.active_embedder, state.target_embedder) == (NEW, "")
    wait_for(lambda: not ChunkVector.objects.filter(embedder=OLD).exists(), timeout=30, what="old removed")
    assert ChunkVector.objects.filter(embedder=NEW).count() == chunks
    assert membership(tenant, "lexical") == lexical
    for topic, text in TOPICS.items():  # the new model finds each document by meaning alone
        hits = search(Tenant.objects.get(pk=tenant.pk), text, k=1, mode="semantic")
        assert hits and hits[0].document_id == documents[topic]
