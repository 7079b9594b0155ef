"""Versions of one document: the published version stays searchable until the next one publishes,
and an older version's job can never publish over a newer published version."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from documents.models import Document, DocumentVersion
from jobs.audit import violations
from jobs.executor import run_job
from jobs.models import JobEvent, StageRun, Status
from jobs.services import cleanup
from jobs.services.reaper import reap
from tests.documents import files
from tests.documents.helpers import (
    NO_OUTPUTS,
    JobThread,
    found_versions,
    job_of,
    make_tenant,
    output_counts,
    output_ids,
    paused_after,
    reload_job,
    run_until_idle,
    upload,
)

pytestmark = pytest.mark.django_db(transaction=True)

# No word in common between the three phrases, so a query finds exactly the versions holding it.
V1_ONLY = "Amber falcon crosses northern ridges"
V2_ONLY = "Granite lighthouse guards western bays"
SHARED = "Cobalt harbor wakes before fishing boats"
V1_PAGES = [f"{V1_ONLY}.", f"{SHARED}."]
V2_PAGES = [f"{V2_ONLY}.", f"{SHARED}."]


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def tenant():
    return make_tenant("acme")


def new_version(tenant, pages: list[str], document: Document | None = None) -> DocumentVersion:
    fresh = Document.objects.get(pk=document.pk) if document is not None else None
    return upload(tenant, files.text_pdf(pages), "handbook.pdf", document=fresh).version


def published(tenant, pages: list[str], document: Document | None = None) -> DocumentVersion:
    version = new_version(tenant, pages, document)
    assert run_until_idle(job_of(version).pk).status == Status.READY
    return version


def test_version_1_stays_searchable_until_version_2_publishes(tenant):
    v1 = published(tenant, V1_PAGES)
    v1_rows = output_ids(v1)
    v2 = new_version(tenant, V2_PAGES, v1.document)

    # v2 queued: v1 is what search shows.
    assert found_versions(tenant, V1_ONLY) == {v1.pk}
    assert found_versions(tenant, SHARED) == {v1.pk}

    with paused_after("indexing") as gate:
        worker = JobThread(job_of(v2).pk)
        worker.start()
        gate.wait_reached()
        # v2 is fully indexed and probed but not published: still only v1 is visible.
        assert output_counts(v2)["index"] > 0
        assert job_of(v2).status == Status.RUNNING
        assert found_versions(tenant, V1_ONLY) == {v1.pk}
        assert found_versions(tenant, SHARED) == {v1.pk}
        assert found_versions(tenant, V2_ONLY) == set()
        assert output_ids(v1) == v1_rows
        gate.release.set()
        worker.finish()

    # v2 published: v1 is gone from search at the same moment, and its rows are removed.
    assert job_of(v2).status == Status.READY
    assert found_versions(tenant, V2_ONLY) == {v2.pk}
    assert found_versions(tenant, SHARED) == {v2.pk}
    assert found_versions(tenant, V1_ONLY) == set()
    document = Document.objects.get(pk=v1.document_id)
    assert document.published_version_id == v2.pk
    v1.refresh_from_db()
    v2.refresh_from_db()
    assert v1.superseded_at is not None and v2.published_at is not None
    assert output_counts(v1) == NO_OUTPUTS


def test_a_replaced_versions_outputs_are_removed_by_the_reaper_when_the_worker_died_first(
    tenant, monkeypatch
):
    v1 = published(tenant, V1_PAGES)
    v1_rows = output_ids(v1)
    # The worker that publishes v2 dies between its commit and the removal of v1's outputs.
    monkeypatch.setattr(cleanup, "job_run_cleanup", lambda *, job_id: False)
    assert run_until_idle(job_of(published_next(tenant, v1)).pk).status == Status.READY
    monkeypatch.undo()
    assert output_ids(v1) == v1_rows
    old_job = job_of(v1)
    assert (old_job.status, old_job.cleanup_from) == (Status.READY, "parsing")
    assert found_versions(tenant, V1_ONLY) == set()  # never searchable meanwhile

    report = reap(now=timezone.now() + timedelta(minutes=5))  # past the reaper's grace
    assert old_job.pk in report.cleaned
    assert output_counts(v1) == NO_OUTPUTS
    old_job = reload_job(old_job)
    # Bookkeeping only: v1's job stays ready, its history untouched.
    assert (old_job.status, old_job.cleanup_from) == (Status.READY, "")
    assert JobEvent.objects.filter(job=old_job, to_status=Status.READY).count() == 1
    assert found_versions(tenant, V2_ONLY) == {Document.objects.get(pk=v1.document_id).published_version_id}
    assert violations() == {}


def published_next(tenant, previous: DocumentVersion) -> DocumentVersion:
    return new_version(tenant, V2_PAGES, Document.objects.get(pk=previous.document_id))


def test_a_failed_newer_version_leaves_the_published_version_searchable(tenant):
    v1 = published(tenant, V1_PAGES)
    v1_rows = output_ids(v1)
    result = upload(
        tenant, files.encrypted_pdf(), "handbook.pdf", document=Document.objects.get(pk=v1.document_id)
    )
    assert run_until_idle(result.job.pk).status == Status.FAILED
    assert Document.objects.get(pk=v1.document_id).published_version_id == v1.pk
    assert found_versions(tenant, V1_ONLY) == {v1.pk}
    assert output_ids(v1) == v1_rows


def test_an_older_job_cannot_publish_over_a_newer_published_version(tenant):
    v1 = new_version(tenant, V1_PAGES)
    v2 = new_version(tenant, V2_PAGES, v1.document)
    old_job, new_job = job_of(v1), job_of(v2)
    assert (old_job.status, new_job.status) == (Status.QUEUED, Status.QUEUED)

    assert run_until_idle(new_job.pk).status == Status.READY
    old_job = run_until_idle(old_job.pk)

    assert (old_job.status, old_job.stage, old_job.error_code) == (Status.FAILED, "indexing", "superseded")
    assert old_job.attempt == 1
    assert run_job(old_job.pk) == "not claimed"
    run = StageRun.objects.get(job=old_job, stage="indexing")
    assert (run.outcome, run.error_code) == ("failed", "superseded")
    # The refused publish was rolled back whole: the old job was never ready, not even briefly.
    assert not JobEvent.objects.filter(job=old_job, to_status=Status.READY).exists()
    assert DocumentVersion.objects.get(pk=v1.pk).published_at is None
    # The newer version is untouched: still published, still searchable, still ready once.
    assert Document.objects.get(pk=v1.document_id).published_version_id == v2.pk
    assert reload_job(new_job).status == Status.READY
    assert JobEvent.objects.filter(job=new_job, to_status=Status.READY).count() == 1
    assert found_versions(tenant, V2_ONLY) == {v2.pk}
    assert found_versions(tenant, SHARED) == {v2.pk}
    assert found_versions(tenant, V1_ONLY) == set()
    assert output_counts(v1)["index"] == 0
    assert violations() == {}


def test_versions_published_in_order_each_replace_the_previous_one(tenant):
    v1 = new_version(tenant, V1_PAGES)
    v2 = new_version(tenant, V2_PAGES, v1.document)
    assert run_until_idle(job_of(v1).pk).status == Status.READY
    assert found_versions(tenant, V1_ONLY) == {v1.pk}
    assert run_until_idle(job_of(v2).pk).status == Status.READY
    assert Document.objects.get(pk=v1.document_id).published_version_id == v2.pk
    assert found_versions(tenant, SHARED) == {v2.pk}


def test_a_superseded_version_leaves_no_rows_behind(tenant):
    v1 = new_version(tenant, V1_PAGES)
    v2 = new_version(tenant, V2_PAGES, v1.document)
    run_until_idle(job_of(v2).pk)
    assert run_until_idle(job_of(v1).pk).error_code == "superseded"
    # v1 can never be published (v2 is newer), so nothing it produced has a use any more.
    assert output_counts(v1) == NO_OUTPUTS
