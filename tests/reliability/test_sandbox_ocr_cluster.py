"""OCR and page rendering in the sandbox, on a real django-q2 cluster with the reaper beside it.

Hostile pages generated here: pixel noise, on which tesseract spins for tens of seconds of CPU
looking for text, and a 14,400-point PDF page rendered past the child's address space (the pixel
cap lifted, so that the memory limit is what stops it). While tesseract spins in the child's
process group the worker keeps heartbeating, another tenant's small document becomes ready on
the other worker, and a cancel ends the job and kills both the child and its tesseract process.
Under a small CPU budget the noise page ends as ``ocr_timeout`` after its retries (the last on
the alternative engine) and the render bomb as ``resource_limit``, each counted against its
cause's attempt limit, each within its deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.engines import ocr
from jobs.errors import get_cause
from jobs.models import FINISHED, Job, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.documents.helpers import make_tenant, upload
from tests.reliability import corpus
from tests.reliability.helpers import alive, descendants, sandbox_readers
from tests.reliability.test_hostile_inputs import describe, start_platform
from tests.reliability.test_sandbox_cluster import (
    responsive_while_spinning_then_cancelled,
    sandbox_cluster_env,
)
from tests.timing import hold_for

# The sandbox's OCR limits on a real cluster: the same on either database, run in the SQLite pass
# only.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster, pytest.mark.database_neutral]


@pytest.fixture
def cluster_env(subprocess_env: dict[str, str], settings: DjangoSettings, tmp_path: Path) -> dict[str, str]:
    if ocr.TESSERACT not in ocr.available_engines():
        if os.environ.get("REQUIRE_OCR") == "1":
            pytest.fail("REQUIRE_OCR=1 but tesseract is not installed")
        pytest.skip("tesseract is not installed")
    return sandbox_cluster_env(
        subprocess_env, settings, tmp_path, OCR_ENGINE=ocr.TESSERACT, JOBS_LEASE_SECONDS="3"
    )


@contextlib.contextmanager
def platform(processes: Processes, env: dict[str, str]) -> Iterator[int]:
    cluster = start_platform(processes, env)
    try:
        yield cluster.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.pid, signal.SIGKILL)


def named(cluster: int, name: str) -> list[int]:
    """The cluster's descendant processes whose command line mentions ``name`` (not bubblewrap's
    and setpriv's, which start the walled-in sandbox child with that command line)."""
    found = []
    for pid in descendants(cluster):
        with contextlib.suppress(OSError):
            launcher = Path(f"/proc/{pid}/comm").read_text().strip() in ("bwrap", "setpriv")
            if not launcher and name.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


def recognizing(cluster: int) -> list[int]:
    """The cluster's tesseract processes at work on a page (not listing its languages)."""
    return [pid for pid in named(cluster, "tesseract") if b"--list-langs" not in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def small_job(tenant: str) -> Job:
    job = upload(make_tenant(tenant), b"Small harbor note from another tenant.", "small.txt").job
    assert job is not None
    return job


def test_ocr_spinning_on_a_hostile_image_leaves_its_worker_responsive_and_dies_on_cancel(
    processes: Processes, cluster_env: dict[str, str]
) -> None:
    with platform(processes, cluster_env) as cluster:
        # 25 MP of noise: about two minutes of tesseract here, far longer than this test needs.
        hostile = upload(make_tenant("hostile"), corpus.noise_png(5_000), "noise.png").job
        assert hostile is not None
        wait_for(
            lambda: Job.objects.get(pk=hostile.pk).stage == "ocr" and recognizing(cluster),
            timeout=90,
            what="tesseract to start on the noise page in a sandbox child",
        )
        (engine,) = recognizing(cluster)
        (child,) = sandbox_readers(cluster)
        assert engine in descendants(child), "tesseract runs in the sandbox child's process tree"

        responsive_while_spinning_then_cancelled(
            hostile, stage="ocr", spinning=engine, what="tesseract", small_timeout=90
        )
        wait_for(lambda: not alive(child), timeout=10, what="the sandbox child to be killed")
        run = StageRun.objects.get(job_id=hostile.pk, stage="ocr")
        assert run.outcome == StageRun.Outcome.CANCELLED, describe(Job.objects.get(pk=hostile.pk))


# A small CPU budget per sandbox call, and no pixel cap: the address-space limit (2 GiB) is what
# stops the 60,000 x 60,000 render at 300 dpi.
LIMITED = {
    "DOCUMENTS_SANDBOX_CPU_SECONDS": "3",
    "DOCUMENTS_MAX_RENDER_PIXELS": str(10**10),
    "OCR_DPI": "300",
}
DEADLINE = 150.0  # both hostile jobs, their retries (2 s, 4 s and 5 s apart) and the small job


def test_hostile_pages_end_in_their_own_codes_in_time_beside_another_tenants_job(
    processes: Processes, cluster_env: dict[str, str]
) -> None:
    with platform(processes, {**cluster_env, **LIMITED}) as cluster:
        tenant = make_tenant("hostile")
        started = time.monotonic()
        # 16 MP of noise: about 6 s of tesseract CPU here, twice the budget it is given.
        spinner = upload(tenant, corpus.noise_png(4_000), "noise.png").job
        bomb = upload(tenant, corpus.huge_page_pdf(), "poster.pdf").job
        small = small_job("other")
        assert spinner is not None and bomb is not None
        ids = [spinner.pk, bomb.pk, small.pk]
        beats: dict[int, set[object]] = {}  # per attempt: the spinner's heartbeats seen in OCR
        tesseract_seen = False
        while time.monotonic() - started < DEADLINE:
            if Job.objects.filter(pk__in=ids, status__in=FINISHED).count() == len(ids):
                break
            job = Job.objects.get(pk=spinner.pk)
            if job.status == Status.RUNNING and job.stage == "ocr":
                beats.setdefault(job.attempt, set()).add(job.heartbeat_at)
                tesseract_seen = tesseract_seen or bool(recognizing(cluster))
            hold_for(0.2)  # the poll interval of this deadline-bound wait
        elapsed = time.monotonic() - started

        jobs = {pk: Job.objects.get(pk=pk) for pk in ids}
        assert jobs[small.pk].status == Status.READY, describe(jobs[small.pk])
        spun, burst = jobs[spinner.pk], jobs[bomb.pk]
        timeout_limit = get_cause("ocr_timeout").rule.max_attempts
        memory_limit = get_cause("resource_limit").rule.max_attempts
        assert (spun.status, spun.error_code, spun.stage, spun.attempt) == (
            Status.FAILED,
            "ocr_timeout",
            "ocr",
            timeout_limit,
        ), describe(spun)
        assert (burst.status, burst.error_code, burst.stage, burst.attempt) == (
            Status.FAILED,
            "resource_limit",
            "ocr",
            memory_limit,
        ), describe(burst)
        assert elapsed < DEADLINE, f"took {elapsed:.0f}s"
        # Each OCR attempt failed in the sandbox with its own cause: no worker was lost to them.
        for job, code, limit in (
            (spun, "ocr_timeout", timeout_limit),
            (burst, "resource_limit", memory_limit),
        ):
            outcomes = list(
                StageRun.objects.filter(job=job, stage="ocr").values_list("error_code", flat=True)
            )
            assert outcomes == [code] * limit, describe(job)
            assert job.error_message == get_cause(code).user_message
        assert tesseract_seen, "tesseract never ran on the noise page"
        renewed = [attempt for attempt, seen in beats.items() if len(seen) >= 2]
        assert renewed, f"no heartbeat was observed while the noise page was in OCR: {beats}"
        assert named(cluster, "tesseract") == [], "a tesseract process outlived its job"
        print(f"\nnoise page: ocr_timeout, render bomb: resource_limit, small job ready, in {elapsed:.0f}s")
