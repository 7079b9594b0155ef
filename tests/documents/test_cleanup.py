"""Cleanup after a cancel or a failure: every unpublished row of the run goes, the published
version's rows are never touched, and a failed stage leaves no partial output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from documents.embedders import configured_embedder
from documents.models import Chunk, Document, DocumentVersion, Page
from documents.sandbox import runner
from jobs.audit import violations
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel, job_retry
from tests.documents import files
from tests.documents.helpers import (
    NO_OUTPUTS,
    JobThread,
    Reply,
    embeddings_server,
    found_versions,
    job_of,
    make_tenant,
    output_counts,
    output_ids,
    paused_after,
    reload_job,
    run_until_idle,
    upload,
    use_http_embeddings,
)

pytestmark = pytest.mark.django_db(transaction=True)

PUBLISHED_PHRASE = "Quartz meadow shelters sleeping deer"
NEXT_PHRASE = "Granite lighthouse guards western bays"
LONG_PAGES = [
    f"Page {n} of the survey: the tide gauge at station {n} read high water twice before the storm "
    "front arrived from the west and the harbour master closed the outer basin."
    for n in range(1, 5)
]


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.JOBS_HEARTBEAT_SECONDS = 0.1
    settings.JOBS_PROGRESS_WRITE_SECONDS = 0
    settings.JOBS_PROGRESS_EVENT_SECONDS = 0


@pytest.fixture
def tenant():
    return make_tenant("acme")


@pytest.fixture
def v1(tenant) -> DocumentVersion:
    """A published version whose rows must survive whatever happens to the next version."""
    result = upload(tenant, files.text_pdf([f"{PUBLISHED_PHRASE}."]), "manual.pdf")
    assert result.job is not None
    assert run_until_idle(result.job.pk).status == Status.READY
    return result.version


def next_version(tenant, v1: DocumentVersion, data: bytes) -> DocumentVersion:
    return upload(tenant, data, "manual.pdf", document=Document.objects.get(pk=v1.document_id)).version


@pytest.mark.parametrize("stage", ["parsing", "ocr", "chunking", "embedding", "indexing"])
def test_cancel_during_a_stage_removes_the_runs_rows_and_keeps_the_published_ones(tenant, v1, stage):
    published_rows = output_ids(v1)
    # OCR only where the OCR stage is the one under test: it is the slow part.
    if stage == "ocr":
        data, phrase = files.scanned_pdf(), files.SCANNED_PHRASE
    else:
        data, phrase = files.text_pdf([f"{NEXT_PHRASE}.", "Second page.", "Third page."]), NEXT_PHRASE
    v2 = next_version(tenant, v1, data)
    job = job_of(v2)
    with paused_after(stage) as gate:
        worker = JobThread(job.pk)
        worker.start()
        gate.wait_reached()
        running = reload_job(job)
        assert (running.status, running.stage) == (Status.RUNNING, stage)
        assert output_counts(v2)["pages"] == 3  # the run has written rows by now
        # The worker's idle sandbox child still holds its copy of the run's input.
        copies = [child.temp_dir for child in runner._idle]
        assert copies and all(folder.exists() for folder in copies)
        job_cancel(job_id=job.pk, actor_name="alice")
        assert reload_job(job).status == Status.CANCEL_REQUESTED
        gate.release.set()
        worker.finish()

    job = reload_job(job)
    assert (job.status, job.worker_token, job.cleanup_from) == (Status.CANCELLED, None, "")
    assert output_counts(v2) == NO_OUTPUTS
    assert StageRun.objects.get(job=job, stage=stage).outcome == StageRun.Outcome.CANCELLED
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert names[-2:] == [("cancel", "user"), ("finish_cancel", "worker")]
    assert not [folder for folder in copies if folder.exists()], "the cancelled input's copy stayed"
    # The published version is exactly as it was, and still what search shows.
    assert output_ids(v1) == published_rows
    assert Document.objects.get(pk=v1.document_id).published_version_id == v1.pk
    assert found_versions(tenant, PUBLISHED_PHRASE) == {v1.pk}
    assert found_versions(tenant, phrase) == set()
    assert violations() == {}


def test_cancelling_a_queued_version_never_touches_the_published_one(tenant, v1):
    published_rows = output_ids(v1)
    v2 = next_version(tenant, v1, files.text_pdf())
    job = job_cancel(job_id=job_of(v2).pk)
    assert job.status == Status.CANCELLED
    assert reload_job(job).cleanup_from == ""
    assert output_ids(v1) == published_rows
    assert found_versions(tenant, PUBLISHED_PHRASE) == {v1.pk}


@pytest.fixture
def flaky_embeddings(settings) -> Iterator[None]:
    """A real embeddings server that answers the first call and refuses the credentials after."""
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40
    settings.EMBEDDING_BATCH_SIZE = 1
    with embeddings_server([Reply(200)], default=Reply(401)) as server:
        use_http_embeddings(settings, server)
        configured_embedder.cache_clear()
        yield
    configured_embedder.cache_clear()


@pytest.mark.usefixtures("flaky_embeddings")
def test_a_failed_stage_leaves_no_partial_output_and_keeps_earlier_stages(tenant):
    version = upload(tenant, files.text_pdf(LONG_PAGES), "survey.pdf").version
    job = run_until_idle(job_of(version).pk)

    assert (job.status, job.stage, job.error_code) == (Status.FAILED, "embedding", "embedding_auth")
    chunks = output_counts(version)["chunks"]
    assert chunks > 2
    # The first batch was embedded and written before the second call was refused ...
    assert JobEvent.objects.filter(job=job, stage="embedding", processed=1, total=chunks).exists()
    # ... and that partial output is gone; the earlier stages' outputs stay for a retry.
    assert output_counts(version) == {"pages": 4, "chunks": chunks, "vectors": 0, "index": 0}
    assert (job.checkpoint, job.cleanup_from) == ({}, "")


def test_an_operator_retry_reuses_the_earlier_stages_outputs(tenant, settings):
    settings.CHUNK_TARGET_TOKENS = 20
    settings.CHUNK_MAX_TOKENS = 40
    with embeddings_server([Reply(401)]) as server:
        use_http_embeddings(settings, server)
        configured_embedder.cache_clear()
        try:
            version = upload(tenant, files.text_pdf(LONG_PAGES), "survey.pdf").version
            job = run_until_idle(job_of(version).pk)
            assert (job.status, job.error_code) == (Status.FAILED, "embedding_auth")
            pages = set(Page.objects.filter(version=version).values_list("pk", flat=True))
            chunks = set(Chunk.objects.filter(version=version).values_list("pk", flat=True))

            # The operator fixed the credentials (the server now answers) and forces a retry.
            job_retry(job_id=job.pk, force=True, actor_name="operator")
            job = run_until_idle(job.pk)
        finally:
            configured_embedder.cache_clear()

    assert job.status == Status.READY
    assert StageRun.objects.filter(job=job, stage="parsing").count() == 1
    assert set(Page.objects.filter(version=version).values_list("pk", flat=True)) == pages
    assert set(Chunk.objects.filter(version=version).values_list("pk", flat=True)) == chunks
    # parsing, chunking, embedding (failed), embedding again, indexing: OCR was passed over at parsing
    assert Job.objects.get(pk=job.pk).attempts_total == 5
