"""Ingestion end to end through a real django-q2 cluster and a real reaper loop, as separate
processes, with real OCR: ready means searchable, a cancel during OCR leaves nothing, and a worker
killed during OCR is recovered and resumes at its checkpoint.

Leases are 8 s (``env`` says why) and the reaper passes every 0.5 s; OCR checkpoints after every
page (``OCR_BATCH_SIZE=1``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fpdf import FPDF

from documents.models import Page
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import ROOT, Processes, wait_for
from tests.documents import files
from tests.documents.helpers import NO_OUTPUTS, make_tenant, output_counts, reload_job, top_hit, upload

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

STAGES = ["parsing", "ocr", "chunking", "embedding", "indexing"]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """The workers' TMPDIR: where a job's private temp directory (and OCR's temp files) go."""
    path = tmp_path / "scratch"
    path.mkdir()
    return path


@pytest.fixture
def env(subprocess_env: dict[str, str], settings, tmp_path: Path, scratch: Path) -> dict[str, str]:
    settings.MEDIA_ROOT = tmp_path / "media"  # uploads from this process land where workers read
    return {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "OCR_BATCH_SIZE": "1",
        "JOBS_PROGRESS_EVENT_SECONDS": "0",
        "TMPDIR": str(scratch),
        "JOBS_SCRATCH_DIR": str(scratch),  # job directories beside OCR's temp files, as checked below
        "JOBS_SCRATCH_SWEEP_SECONDS": "0",  # every task sweeps, live jobs' directories included
        # A lease of 8 s, not the suite's 3, as the other kill-and-take-over tests: on a slow
        # machine beside other test workers a live worker's heartbeats can be late past 3 s.
        "JOBS_LEASE_SECONDS": "8",
    }


@pytest.fixture
def platform(processes: Processes, env: dict[str, str]) -> Processes:
    processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)
    return processes


def scanned_pages_pdf(count: int) -> bytes:
    """``count`` small image-only pages (no text layer), each showing its own line."""
    pdf = FPDF(format=(148, 105))  # small pages: less to render and OCR per page
    pdf.set_creation_date(datetime(2024, 1, 2, tzinfo=UTC))  # the same bytes on every run
    for number in range(1, count + 1):
        pdf.add_page()
        pdf.image(files.text_image([f"KESTREL PAGE {number:02d}"]), x=10, y=10, w=100)
    return bytes(pdf.output())


def check_jobs(env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check_jobs"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def wait_status(job: Job, status: str, platform: Processes, timeout: float = 60) -> Job:
    try:
        wait_for(lambda: reload_job(job).status == status, timeout=timeout, what=f"job {status}")
    except AssertionError:
        now = reload_job(job)
        raise AssertionError(f"job is {now.status}/{now.stage} {now.error_code}\n{platform.logs()}") from None
    return reload_job(job)


def test_the_cluster_runs_every_stage_and_ready_means_searchable(platform, env):
    tenant = make_tenant("acme")
    result = upload(tenant, files.scanned_pdf(), "scan.pdf")
    assert result.job is not None

    job = wait_status(result.job, Status.READY, platform)
    hit = top_hit(tenant, files.SCANNED_PHRASE)  # at the moment it is ready

    assert hit is not None and hit.version_id == result.version.pk
    assert files.SCANNED_PHRASE in hit.snippet and hit.page_start <= 2 <= hit.page_end
    assert (job.progress, job.skipped_stages) == (100.0, [])
    runs = list(StageRun.objects.filter(job=job).values_list("stage", "outcome", "worker_name"))
    assert [(stage, outcome) for stage, outcome, _ in runs] == [
        *[(stage, "advanced") for stage in STAGES[:-1]],
        ("indexing", "ready"),
    ]
    assert all(not name.endswith(f":{os.getpid()}") for _, _, name in runs)  # the cluster ran them
    assert JobEvent.objects.filter(job=job, to_status=Status.READY).count() == 1
    check_jobs(env)


def test_a_cancel_during_ocr_ends_cancelled_and_leaves_nothing(platform, env, scratch: Path):
    tenant = make_tenant("acme")
    result = upload(tenant, scanned_pages_pdf(10), "scan.pdf")
    assert result.job is not None
    version = result.version
    wait_for(
        lambda: Page.objects.filter(version=version, ocr_attempts__gte=1).exists(),
        timeout=60,
        what="OCR to start",
    )
    assert (reload_job(result.job).status, reload_job(result.job).stage) == (Status.RUNNING, "ocr")

    job_cancel(job_id=result.job.pk, actor_name="alice")
    wait_status(result.job, Status.CANCELLED, platform, timeout=30)
    # The worker records the cancel first, then removes the outputs and clears the marker.
    wait_for(lambda: reload_job(result.job).cleanup_from == "", timeout=30, what="the cleanup")
    job = reload_job(result.job)

    # Stopped at a safe point inside OCR, well before its end, and cleaned up after itself.
    assert job.stage == "ocr" and job.total == 10 and (job.processed or 0) < 10
    assert StageRun.objects.get(job=job, stage="ocr").outcome == StageRun.Outcome.CANCELLED
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert names[-2:] == [("cancel", "user"), ("finish_cancel", "worker")]
    assert job.worker_token is None
    assert output_counts(version) == NO_OUTPUTS
    assert top_hit(tenant, "KESTREL PAGE") is None
    assert not [p.name for p in scratch.iterdir() if p.name.startswith(f"job-{job.pk}")]
    assert list(scratch.iterdir()) == [], "temp files were left behind"
    check_jobs(env)


def worker_pid(job: Job) -> int:
    run = StageRun.objects.get(job=job, stage="ocr", outcome=StageRun.Outcome.RUNNING)
    return int(run.worker_name.rsplit(":", 1)[1])


def test_a_worker_killed_during_ocr_is_recovered_and_resumes_at_its_checkpoint(platform, env, scratch: Path):
    pages = 20
    tenant = make_tenant("acme")
    result = upload(tenant, scanned_pages_pdf(pages), "scan.pdf")
    assert result.job is not None
    job, version = result.job, result.version
    wait_for(
        lambda: reload_job(job).stage == "ocr" and reload_job(job).checkpoint.get("done", 0) >= 3,
        timeout=60,
        what="three pages OCR'd",
    )
    pid = worker_pid(job)
    saved_before_kill = reload_job(job).checkpoint["done"]
    assert 3 <= saved_before_kill < pages - 3, "OCR was too fast to kill in the middle"

    os.kill(pid, signal.SIGKILL)
    # What a worker killed mid-stage leaves: its private temp directory, and pytesseract's files
    # of the page in flight (aged past the OCR timeout, which no live run outlives).
    left = [scratch / f"job-{job.pk}-killed", scratch / "tess_killed_input.PNG", *scratch.glob("tess_*")]
    left[0].mkdir()
    (left[0] / "upload.pdf").write_bytes(b"%PDF-")
    left[1].write_bytes(b"png")
    for path in left[1:]:
        os.utime(path, (time.time() - 3600, time.time() - 3600))

    job = wait_status(job, Status.READY, platform, timeout=90)
    # The replacement worker swept them before it claimed the job.
    assert not [path for path in left if path.exists()]
    transitions = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert ("mark_stalled", "reaper") in transitions and ("take_over", "reaper") in transitions
    ocr_runs = list(StageRun.objects.filter(job=job, stage="ocr").order_by("started_at"))
    assert [r.outcome for r in ocr_runs] == ["lost", "advanced"]
    assert ocr_runs[0].worker_name.endswith(f":{pid}") and not ocr_runs[1].worker_name.endswith(f":{pid}")

    # The new worker started OCR at the checkpoint the killed one had saved, not at page 1.
    take_over = JobEvent.objects.get(job=job, name="take_over")
    resumed_at = (
        JobEvent.objects.filter(job=job, pk__gt=take_over.pk, name="progress", stage="ocr")
        .order_by("pk")
        .values_list("processed", flat=True)
        .first()
    )
    assert resumed_at is not None and resumed_at >= saved_before_kill
    attempts = dict(Page.objects.filter(version=version).values_list("number", "ocr_attempts"))
    assert sorted(attempts) == list(range(1, pages + 1))
    assert all(attempts[n] == 1 for n in range(1, resumed_at + 1)), attempts
    assert all(attempts[n] >= 1 for n in attempts), attempts
    assert sum(attempts.values()) <= pages + 1, attempts  # at most the page in flight ran twice

    assert JobEvent.objects.filter(job=job, to_status=Status.READY).count() == 1
    assert job.progress == 100.0
    hit = top_hit(tenant, "KESTREL PAGE 17")
    assert hit is not None and hit.version_id == version.pk
    check_jobs(env)
