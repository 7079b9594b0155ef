"""Graceful drain on a real django-q2 cluster: SIGTERM mid-OCR, sent to the
cluster's leader alone or to its whole process group (systemd's ``KillMode=control-group``).

Either way the worker stops at its next safe point and hands the job back: queued at its OCR
checkpoint, no lease left for the reaper to expire, the attempt not counted, nothing failed. Every
process of the cluster's tree (leader, sentinel, workers, pusher, monitor, OCR children) is gone
within the drain bound, and a new cluster finishes the job to ready without reading the pages that
were already done again. Before this, a group SIGTERM left the leader hanging beside a defunct
sentinel until SIGKILL, and a leader-only SIGTERM let the worker finish its whole stage first.

No reaper runs beside the clusters: the job is queued (and dispatched again) by the hand-back
itself, and the long lease means a job that was not handed back would still read ``running``.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.models import Page
from jobs.models import Job, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.documents.helpers import make_tenant, upload
from tests.reliability import generated
from tests.reliability.helpers import alive, check_jobs, descendants
from tests.reliability.test_hostile_inputs import describe

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster, pytest.mark.postgres]

DRAIN_SECONDS = 10  # the clusters' JOBS_DRAIN_SECONDS
PAGES = 8
# How much later than the bound the test still accepts "gone": its own polling, /proc reads and a
# loaded machine; a hang (the finding) lasts until SIGKILL, i.e. for ever.
SLACK = 5


@pytest.fixture
def cluster_env(subprocess_env: dict[str, str], settings: DjangoSettings, tmp_path: Path) -> dict[str, str]:
    settings.MEDIA_ROOT = tmp_path / "media"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "TMPDIR": str(scratch),
        "JOBS_DRAIN_SECONDS": str(DRAIN_SECONDS),
        # Longer than the whole test: only a hand-back can release this job's lease in time.
        "JOBS_LEASE_SECONDS": "120",
        "JOBS_HEARTBEAT_SECONDS": "1",
        # One page per OCR batch, so each page's text commits with its own checkpoint, and pages
        # slow enough that the signal lands mid-stage.
        "OCR_BATCH_SIZE": "1",
        "OCR_DPI": "300",
        "LOG_LEVEL": "INFO",
    }


def _ocr_pages(job: Job) -> list[Page]:
    return list(Page.objects.filter(version__job_id=job.pk, needs_ocr=True).order_by("number"))


def _mid_ocr(job_id: Any) -> Job | None:
    job = Job.objects.get(pk=job_id)
    done = int((job.checkpoint or {}).get("done", 0))
    return job if job.status == Status.RUNNING and job.stage == "ocr" and 2 <= done < PAGES - 2 else None


@pytest.mark.parametrize("target", ["leader", "process-group"])
def test_sigterm_mid_ocr_hands_the_job_back_and_the_whole_tree_exits_within_the_bound(
    target: str, processes: Processes, cluster_env: dict[str, str]
) -> None:
    cluster = processes.manage("qcluster", ["qcluster"], cluster_env)
    phrases = generated.Phrases(random.Random(16))
    scan = generated.scanned_pages_pdf([phrases.next() for _ in range(PAGES)])
    uploaded = upload(make_tenant("drain"), scan, "scan.pdf").job
    assert uploaded is not None
    job_id = uploaded.pk
    wait_for(lambda: _mid_ocr(job_id), timeout=240, interval=0.05, what="OCR two pages into the scan")

    tree = [cluster.pid, *descendants(cluster.pid)]
    assert len(tree) >= 5, tree  # leader, sentinel, two workers, pusher, monitor (+ OCR children)
    if target == "leader":
        os.kill(cluster.pid, signal.SIGTERM)
    else:
        os.killpg(cluster.pid, signal.SIGTERM)
    sent = time.monotonic()
    left = lambda: [pid for pid in tree + descendants(cluster.pid) if alive(pid)]  # noqa: E731
    wait_for(lambda: not left(), timeout=DRAIN_SECONDS + SLACK, what=f"the cluster's tree to exit: {left()}")
    gone_after = time.monotonic() - sent
    assert cluster.wait(timeout=5) == 0, processes.logs()  # 0: nothing had to be killed at the bound

    job = Job.objects.get(pk=job_id)
    detail = f"{describe(job)}\n(tree gone after {gone_after:.1f}s)\n{processes.logs()}"
    assert job.status == Status.QUEUED, detail
    assert (job.stage, job.worker_token, job.lease_expires_at) == ("ocr", None, None), detail
    assert (job.attempt, job.error_code) == (0, ""), detail
    checkpoint = int(job.checkpoint["done"])
    assert 2 <= checkpoint < PAGES, detail
    runs = list(StageRun.objects.filter(job=job, stage="ocr").values_list("outcome", flat=True))
    assert runs == [StageRun.Outcome.HANDED_BACK], detail
    pages = _ocr_pages(job)
    finished = {page.number: page.ocr_attempts for page in pages[:checkpoint]}
    assert set(finished.values()) == {1}, finished
    assert all(page.text for page in pages[:checkpoint])

    processes.manage("qcluster-again", ["qcluster"], cluster_env)
    wait_for(
        lambda: Job.objects.get(pk=job_id).status in (Status.READY, Status.FAILED),
        timeout=300,
        what="a new cluster to finish the job",
    )
    job = Job.objects.get(pk=job_id)
    assert job.status == Status.READY, describe(job)
    again = {page.number: page.ocr_attempts for page in _ocr_pages(job)[:checkpoint]}
    assert again == finished, "pages done before the drain were read again"
    audit = check_jobs(cluster_env)
    assert audit.returncode == 0, audit.stdout + audit.stderr
