"""The whole platform with its files on object storage: two "machines", each with a django-q2
cluster and a local media folder of its own that must stay empty, share only the database and a
bucket of a real SeaweedFS (the storage settings reach every process through the environment, as
in a deployment). The CLI ingests from one machine, the clusters parse what they read from the
bucket, ready documents are searchable, a new version supersedes an old one whose object the
reaper's retention sweep removes, deletes remove their objects, and ``check_jobs`` passes: the
chaos run's upload -> ready -> delete -> retention path, with media on SeaweedFS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from documents.models import Deletion, Document, DocumentVersion, Tenant
from documents.services.delete import document_delete
from documents.services.upload import document_upload
from jobs.models import FINISHED, Job, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.documents import files
from tests.documents.helpers import files_under, top_hit
from tests.documents.test_ingest_cluster import check_jobs

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHRASES = [
    "Amber falcon circles the salt tower",
    "Cobalt tram climbs the northern hill",
    "Obsidian heron watches the marsh",
    "Vermilion kite over the quarry",
    "Jade lantern floats down the canal",
    "Ivory compass points to the glacier",
]


def _finished(tenant: str) -> bool:
    return not Job.objects.filter(tenant=tenant).exclude(status__in=FINISHED).exists()


def test_two_clusters_with_media_on_seaweedfs_ingest_search_delete_and_free(
    processes: Processes,
    subprocess_env: dict[str, str],
    s3_media: Any,
    s3_bucket: str,
    settings: Any,
    tmp_path: Path,
) -> None:
    seaweed = s3_media
    settings.MEDIA_ROOT = tmp_path / "media-here"  # this process writes to the bucket too
    machines: dict[str, dict[str, str]] = {}
    for name in ("a", "b"):
        scratch = tmp_path / f"scratch-{name}"
        scratch.mkdir()
        machines[name] = {
            **subprocess_env,
            **seaweed.env(s3_bucket),
            "MEDIA_ROOT": str(tmp_path / f"media-{name}"),
            "TMPDIR": str(scratch),
            "JOBS_SCRATCH_DIR": str(scratch),
            "DOCUMENTS_STORAGE_RETENTION_DAYS": "0",  # the reaper frees superseded bytes at once
            "DOCUMENTS_DELETE_AUDIT_GRACE": "0",
        }
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for index, phrase in enumerate(PHRASES):
        (inbox / f"doc-{index}.pdf").write_bytes(files.text_pdf([f"{phrase}.", f"Page two of {index}."]))
    Tenant.objects.create(slug="s3", name="S3", max_running_jobs=8)

    for name, env in machines.items():
        processes.manage(f"qcluster-{name}", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], machines["a"])
    ingest = processes.manage(
        "ingest", ["ingest", str(inbox), "--tenant", "s3", "--timeout", "180"], machines["a"]
    )
    try:
        wait_for(lambda: Job.objects.filter(tenant="s3").count() == len(PHRASES), timeout=120, what="uploads")
        wait_for(lambda: _finished("s3"), timeout=240, interval=0.2, what="every job to finish")
        ingest.wait(timeout=60)
    except Exception as exc:
        raise AssertionError(f"{exc}\n{processes.logs()}\n--- weed\n{seaweed.log_tail()}") from None

    tenant = Tenant.objects.get(slug="s3")
    assert set(Job.objects.filter(tenant="s3").values_list("status", flat=True)) == {Status.READY}
    workers = set(StageRun.objects.filter(job__tenant="s3").values_list("worker_name", flat=True))
    assert len(workers) >= 2, workers  # parsed by the clusters' processes, not by this test
    for phrase in PHRASES:
        assert top_hit(tenant, phrase) is not None, phrase
    versions = DocumentVersion.objects.filter(document__tenant=tenant)
    assert seaweed.keys(s3_bucket) == sorted(str(v.file.name) for v in versions)

    # A new version of one document: the old one's bytes are freed by the reaper's sweep.
    first = Document.objects.get(tenant=tenant, title__icontains="doc-0")
    old = DocumentVersion.objects.get(document=first)
    replaced = document_upload(
        tenant=tenant,
        data=files.text_pdf(["Saffron ferry leaves the fjord."]),
        filename="doc-0.pdf",
        document=first,
    )
    assert replaced.job is not None
    job_id = replaced.job.pk
    wait_for(lambda: Job.objects.get(pk=job_id).status == Status.READY, timeout=120, what="version 2")
    wait_for(
        lambda: DocumentVersion.objects.get(pk=old.pk).bytes_freed_at is not None,
        timeout=60,
        what="the retention sweep to free version 1",
    )
    assert old.file.name not in seaweed.keys(s3_bucket)
    assert top_hit(tenant, "Saffron ferry") is not None

    # Two deletes: the objects go with the cleanup (a worker or the reaper finishes it).
    doomed = list(Document.objects.filter(tenant=tenant).exclude(pk=first.pk).order_by("title")[:2])
    doomed_keys = {v.file.name for v in DocumentVersion.objects.filter(document__in=doomed)}
    for document in doomed:
        assert document_delete(tenant=tenant, document_id=document.pk) is not None
    wait_for(
        lambda: not Deletion.objects.filter(document_id__in=[d.pk for d in doomed], cleaned_at=None).exists(),
        timeout=60,
        what="the deletions' cleanup",
    )

    left = seaweed.keys(s3_bucket)
    assert not doomed_keys & set(left)
    live = DocumentVersion.objects.filter(document__tenant=tenant, bytes_freed_at=None)
    assert left == sorted(str(v.file.name) for v in live) and len(left) == len(PHRASES) - 2
    for name in ("a", "b"):  # nothing on either machine's disk, nothing here
        assert files_under(tmp_path / f"media-{name}") == []
    assert files_under(Path(settings.MEDIA_ROOT)) == []
    check_jobs(machines["b"])
