"""The whole pipeline against a real OpenAI-compatible embeddings server on 127.0.0.1: throttling
and outages are retried as their causes say (honouring Retry-After), a refused credential fails at
once, and the key never reaches a message."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from documents.embedders import configured_embedder
from documents.kinds import INGEST as KIND
from documents.models import IndexEntry
from jobs import pipelines
from jobs.audit import violations
from jobs.executor import run_job
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.retry import RetryRule
from tests.conftest import wait_for
from tests.documents import files
from tests.documents.helpers import (
    API_KEY,
    OK,
    EmbeddingsServer,
    Reply,
    embeddings_server,
    job_of,
    make_tenant,
    reload_job,
    run_until_idle,
    top_hit,
    upload,
    use_http_embeddings,
)

pytestmark = pytest.mark.django_db(transaction=True)

PHRASE = "Cobalt harbor wakes before the fishing boats"


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def quick_backoff() -> Iterator[None]:
    """The real pipeline with shorter backoff for the embedding causes (a provider's Retry-After
    is still a floor), so the retries take a second instead of tens."""
    original = pipelines.get(KIND)
    rules = {
        "embedding_rate_limited": RetryRule(max_attempts=10, base_delay=0.2, max_delay=5),
        "embedding_provider_down": RetryRule(max_attempts=6, base_delay=0.2, max_delay=5),
    }
    stages = tuple(
        replace(s, retry={**s.retry, **rules}) if s.name == "embedding" else s for s in original.stages
    )
    pipelines.register(replace(original, stages=stages))
    yield
    pipelines.register(original)


def serving(settings, script: list[Reply], default: Reply = OK) -> Iterator[EmbeddingsServer]:
    with embeddings_server(script, default=default) as server:
        use_http_embeddings(settings, server)
        configured_embedder.cache_clear()
        try:
            yield server
        finally:
            configured_embedder.cache_clear()


@pytest.fixture
def flaky_provider(settings) -> Iterator[EmbeddingsServer]:
    """Throttles the first call (Retry-After: 1), is down for the second, then answers."""
    yield from serving(settings, [Reply(429, {"Retry-After": "1"}), Reply(503)])


@pytest.fixture
def refusing_provider(settings) -> Iterator[EmbeddingsServer]:
    yield from serving(settings, [], default=Reply(401))


def wait_until_due(job: Job) -> None:
    def due() -> bool:
        not_before = reload_job(job).not_before
        return not_before is None or not_before <= timezone.now()

    wait_for(due, timeout=10, what="the backoff to pass")


@pytest.mark.usefixtures("quick_backoff")
def test_throttling_then_an_outage_are_retried_and_the_job_ends_ready(flaky_provider):
    server = flaky_provider
    tenant = make_tenant("acme")
    version = upload(tenant, files.text_pdf(), "harbor.pdf").version
    job = job_of(version)

    assert run_job(job.pk) == "done"
    job = reload_job(job)
    assert (job.status, job.stage, job.error_code) == (Status.QUEUED, "embedding", "embedding_rate_limited")
    throttled = server.received[0]
    assert throttled.status == 429 and throttled.answered_at is not None
    # The provider's Retry-After is honoured: not due, and not claimable, before a second passed.
    assert job.not_before >= throttled.answered_at + timedelta(seconds=1)
    assert run_job(job.pk) == "not claimed"

    wait_until_due(job)
    assert run_job(job.pk) == "done"
    job = reload_job(job)
    assert (job.status, job.stage, job.error_code) == (Status.QUEUED, "embedding", "embedding_provider_down")
    assert server.received[1].status == 503
    assert server.received[1].at >= throttled.answered_at + timedelta(seconds=1)

    wait_until_due(job)
    job = run_until_idle(job.pk)
    assert (job.status, job.progress, job.error_code) == (Status.READY, 100.0, "")

    runs = list(StageRun.objects.filter(job=job, stage="embedding").values_list("outcome", "error_code"))
    assert runs == [
        ("retry", "embedding_rate_limited"),
        ("retry", "embedding_provider_down"),
        ("advanced", ""),
    ]
    retries = list(JobEvent.objects.filter(job=job, name="retry_later").values_list("reason", flat=True))
    assert [r.split(":")[0] for r in retries] == ["embedding_rate_limited", "embedding_provider_down"]
    assert {r.authorization for r in server.received} == {f"Bearer {API_KEY}"}
    assert {r.model for r in server.received} == {"test-embed-1"}
    assert set(IndexEntry.objects.filter(version=version).values_list("embedder", flat=True)) == {
        "http-test-embed-1"
    }

    # Search embeds the query through the same provider and finds the document.
    calls = len(server.received)
    hit = top_hit(tenant, PHRASE)
    assert hit is not None and hit.version_id == version.pk and PHRASE in hit.snippet
    assert len(server.received) == calls + 1 and server.received[-1].inputs == [PHRASE]
    assert violations() == {}  # what check_jobs audits: progress never fell, no stray lease ...


def test_a_refused_credential_fails_once_and_never_leaks_the_key(refusing_provider):
    server = refusing_provider
    tenant = make_tenant("acme")
    version = upload(tenant, files.text_pdf(), "harbor.pdf").version

    job = run_until_idle(job_of(version).pk)

    assert (job.status, job.stage, job.error_code) == (Status.FAILED, "embedding", "embedding_auth")
    assert job.state_word() == "embedding_failed"
    assert job.attempt == 1
    assert len(server.received) == 1
    assert run_job(job.pk) == "not claimed"  # no automatic retry
    run = StageRun.objects.get(job=job, stage="embedding")
    assert (run.outcome, run.error_code) == ("failed", "embedding_auth")
    assert "HTTP 401" in run.error_detail  # the operator sees what happened ...
    assert "[redacted]" in run.error_detail  # (the echoed key was there, and was scrubbed)
    # ... but never the credential, though the provider echoed it back.
    assert API_KEY not in job.error_message
    assert API_KEY not in run.error_detail and API_KEY not in run.traceback
    assert not any(
        API_KEY in reason for reason in JobEvent.objects.filter(job=job).values_list("reason", flat=True)
    )
    assert "127.0.0.1" not in job.error_message
    assert not IndexEntry.objects.filter(version=version).exists()
