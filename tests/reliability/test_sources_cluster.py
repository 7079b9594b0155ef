"""Folder-source syncs on real django-q2 clusters: a worker SIGKILLed mid-listing and mid-apply,
and a cancel of a running sync.

A sync pauses at a known item through the test app's hook (``tests/testapp/sources.py``: the
real folder connector, holding at one key while a file exists, the heartbeat going on). Then the
worker holding it is SIGKILLed, or the sync cancelled. The engine's own recovery (the reaper
process finds the lease run out and hands the stage to another worker) must let the sync resume
and converge: every file exactly one document, one version each, no duplicate, the counts and
the item rows right, and a later sync finding everything unchanged. A cancelled sync stops at its
next safe point, keeps what it applied consistent and shows ``cancelled``; a later sync converges.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.kinds import INGEST, SYNC
from documents.models import Document, DocumentVersion, Tenant
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.selectors import source_out
from documents.sources.services import sync_start
from jobs.models import FINISHED, Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import Processes, wait_for
from tests.documents.helpers import make_tenant
from tests.documents.source_helpers import folder_source, heartbeat_since, write
from tests.reliability.helpers import alive, check_jobs, descendants

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster, pytest.mark.postgres]

FILES = 60
PAUSE_AT = "doc-025.txt"  # 25 files sorted before it


@pytest.fixture
def folder(tmp_path: Path, settings: DjangoSettings) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    root = tmp_path / "allowed"
    for n in range(FILES):
        write(root / "handbook", f"doc-{n:03d}.txt", f"Handbook page {n} speaks of the word tern{n}.\n")
    settings.SOURCES_ALLOWED_ROOTS = [str(root)]
    return root / "handbook"


@pytest.fixture
def pause(tmp_path: Path) -> Path:
    path = tmp_path / "pause"
    path.mkdir()
    (path / "hold").write_text("")
    return path


def cluster_env(subprocess_env: dict[str, str], folder: Path, pause: Path, stage: str) -> dict[str, str]:
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(folder.parent.parent / "media"),
        "SOURCES_ALLOWED_ROOTS": str(folder.parent),
        "TEST_SOURCE_PAUSE": f"{stage}:{PAUSE_AT}:{pause}",
        "JOBS_STUCK_EXIT_SECONDS": "60",
    }


def paused_worker(pause: Path, cluster: int) -> int:
    """The pid of the cluster's worker that holds the sync at the pause."""
    reached = wait_for(
        lambda: (pause / "reached").exists() and (pause / "reached").read_text(),
        timeout=120,
        what="the sync to reach the pause",
    )
    pid = int(reached)
    assert pid in descendants(cluster), (pid, descendants(cluster))
    return pid


def settled(job_id: Any) -> bool:
    """The sync finished and no ingestion job is left to run."""
    if Job.objects.get(pk=job_id).status not in FINISHED:
        return False
    return not Job.objects.filter(kind=INGEST).exclude(status__in=FINISHED).exists()


def assert_converged(tenant: Tenant, source: Source, processes: Processes) -> None:
    """Every file exactly one live document with one ready version; one item row each."""
    documents = Document.objects.filter(tenant=tenant)
    assert documents.count() == FILES, processes.logs()
    assert documents.filter(deleted_at=None, published_version__isnull=False).count() == FILES
    assert DocumentVersion.objects.filter(document__tenant=tenant).count() == FILES
    items = SourceItem.objects.filter(source=source)
    assert items.count() == FILES
    assert sorted(items.values_list("key", flat=True)) == [f"doc-{n:03d}.txt" for n in range(FILES)]
    assert items.exclude(document=None).values("document").distinct().count() == FILES
    assert not items.exclude(error_code="").exists()
    names = sorted(documents.values_list("title", flat=True))
    assert len(set(names)) == FILES, names
    failed = Job.objects.filter(kind=INGEST).exclude(status=Status.READY)
    assert not failed.exists(), list(failed.values_list("status", "error_code"))


def resync_finds_everything_unchanged(source: Source) -> None:
    again = sync_start(source=source).sync
    wait_for(lambda: Job.objects.get(pk=again.job_id).status in FINISHED, timeout=120, what="a later sync")
    again.refresh_from_db()
    assert Job.objects.get(pk=again.job_id).status == Status.READY
    assert again.counts == {
        "found": FILES,
        "new": 0,
        "changed": 0,
        "removed": 0,
        "unchanged": FILES,
        "failed": 0,
    }


@pytest.mark.parametrize("stage", ["list", "apply"])
def test_a_sync_whose_worker_is_killed_mid_stage_is_recovered_and_converges(
    stage: str, processes: Processes, subprocess_env: dict[str, str], folder: Path, pause: Path
) -> None:
    env = cluster_env(subprocess_env, folder, pause, stage)
    cluster = processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    tenant = make_tenant("chaos-sync")
    source = folder_source(tenant, folder)
    sync = sync_start(source=source).sync

    pid = paused_worker(pause, cluster.pid)
    job = Job.objects.get(pk=sync.job_id)
    assert (job.status, job.stage) == (Status.RUNNING, stage), job.status
    if stage == "apply":
        # The files before the pause are applied, each with its item row; the rest not yet.
        assert SourceItem.objects.filter(source=source).exclude(document=None).count() == 25
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), timeout=10, what="the worker to die")
    (pause / "hold").unlink()

    wait_for(lambda: settled(sync.job_id), timeout=240, what="the sync and its ingestion to finish")
    job = Job.objects.get(pk=sync.job_id)
    assert job.status == Status.READY, (job.status, job.error_code, processes.logs())
    runs = list(
        StageRun.objects.filter(job=job, stage=stage).order_by("pk").values_list("outcome", flat=True)
    )
    done = StageRun.Outcome.ADVANCED if stage == "list" else StageRun.Outcome.READY
    assert runs == [StageRun.Outcome.LOST, done], runs  # lost with its worker, then done again
    assert JobEvent.objects.filter(job=job, actor="reaper").exists()  # recovered by the reaper
    sync.refresh_from_db()
    assert sync.finished_at is not None
    assert sync.counts == dict(found=FILES, new=FILES, changed=0, removed=0, unchanged=0, failed=0)
    assert_converged(tenant, source, processes)
    resync_finds_everything_unchanged(source)
    assert Document.objects.filter(tenant=tenant).count() == FILES
    audit = check_jobs(env)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_a_cancelled_sync_stops_at_its_next_safe_point_and_a_later_sync_converges(
    processes: Processes, subprocess_env: dict[str, str], folder: Path, pause: Path
) -> None:
    env = cluster_env(subprocess_env, folder, pause, "apply")
    cluster = processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    tenant = make_tenant("cancel-sync")
    source = folder_source(tenant, folder)
    sync = sync_start(source=source).sync
    paused_worker(pause, cluster.pid)

    job_cancel(job_id=sync.job_id, actor_name="alice")
    asked = Job.objects.get(pk=sync.job_id).cancel_requested_at
    assert asked is not None
    # The worker learns of the cancel with its next heartbeat; two of them since make sure the
    # first one's answer has reached the stage before the read in progress goes on.
    wait_for(
        lambda: heartbeat_since(sync.job_id, asked + timedelta(seconds=0.5)),
        timeout=30,
        what="the worker's heartbeats since the cancel",
    )
    (pause / "hold").unlink()  # the read in progress finishes; the next item is a safe point
    wait_for(lambda: settled(sync.job_id), timeout=120, what="the sync to stop")
    job = Job.objects.get(pk=sync.job_id)
    assert job.status == Status.CANCELLED, (job.status, job.error_code, processes.logs())
    sync.refresh_from_db()
    assert sync.finished_at is not None
    shown = source_out(source)["last_sync"]
    assert shown["state"] == "cancelled", shown
    # Applied so far: the 25 files before the pause and the one being read; each a whole upload.
    items = SourceItem.objects.filter(source=source)
    applied = sorted(items.exclude(document=None).values_list("key", flat=True))
    assert applied == [f"doc-{n:03d}.txt" for n in range(26)], applied
    documents = Document.objects.filter(tenant=tenant)
    assert documents.count() == 26
    assert set(documents.values_list("pk", flat=True)) == set(items.values_list("document_id", flat=True))
    assert DocumentVersion.objects.filter(document__tenant=tenant).count() == 26

    # A later sync (no pause now) does the rest once.
    (pause / "reached").unlink()
    later = sync_start(source=source).sync
    assert later.pk != sync.pk
    wait_for(lambda: settled(later.job_id), timeout=240, what="a later sync and its ingestion")
    assert Job.objects.get(pk=later.job_id).status == Status.READY
    later.refresh_from_db()
    assert later.counts == {
        "found": FILES,
        "new": FILES - 26,
        "changed": 0,
        "removed": 0,
        "unchanged": 26,
        "failed": 0,
    }
    assert_converged(tenant, source, processes)
    assert SourceSync.objects.filter(source=source).count() == 2
    assert Job.objects.filter(kind=SYNC).count() == 2
    audit = check_jobs(env)
    assert audit.returncode == 0, audit.stdout + audit.stderr
