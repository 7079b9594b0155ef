"""End to end through a real django-q2 cluster and a real reaper loop, as separate processes.

The toy pipeline (tests/testapp) is registered in the workers by the test settings. Leases are
3 s and the reaper passes every 0.5 s here, so a killed worker's job is recovered in seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django_q.models import OrmQ, Task

from jobs.models import Job, JobEvent, Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import ROOT, Processes, wait_for
from tests.jobs.helpers import new_job, reload
from tests.testapp.models import Call, Cleaned, Output, Published

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def platform(processes: Processes, subprocess_env: dict[str, str]) -> Processes:
    processes.manage("qcluster", ["qcluster"], subprocess_env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], subprocess_env)
    return processes


def check_jobs(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check_jobs"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def wait_status(job: Job, status: str, platform: Processes, timeout: float = 60) -> Job:
    try:
        wait_for(lambda: reload(job).status == status, timeout=timeout, what=f"job {status}")
    except AssertionError:
        raise AssertionError(f"job is {reload(job).status}/{reload(job).stage}\n{platform.logs()}") from None
    return reload(job)


def test_a_job_runs_through_every_stage_to_ready(platform, subprocess_env):
    job = new_job(pages=5, page_sleep=0.05)
    job = wait_status(job, Status.READY, platform)
    assert job.progress == 100
    assert Published.objects.filter(job_id=job.pk).count() == 1
    assert Output.objects.filter(job_id=job.pk).count() == 5
    # The broker message was acknowledged, and q2 kept no result row: the job table is the record.
    wait_for(lambda: not OrmQ.objects.exists(), timeout=10, what="the acknowledgement")
    assert not Task.objects.filter(name=f"job-{job.pk}").exists()
    result = check_jobs(subprocess_env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_killed_worker_is_stalled_recovered_and_resumes_from_its_checkpoint(platform, subprocess_env):
    job = new_job(pages=10, page_sleep=0.3)
    call = wait_for(
        lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=4).first(), timeout=60, what="page 4"
    )
    os.kill(call.pid, signal.SIGKILL)
    saved = reload(job).checkpoint["next"]
    assert saved >= 4

    job = wait_status(job, Status.READY, platform, timeout=90)
    names = list(JobEvent.objects.filter(job=job, kind="transition").values_list("name", "actor"))
    assert ("mark_stalled", "reaper") in names
    assert ("take_over", "reaper") in names
    units = list(Call.objects.filter(job_id=job.pk, stage="pages").values_list("unit", flat=True))
    # Pages saved before the kill ran once; the stage resumed at the checkpoint, not at page 0.
    for unit in range(saved):
        assert units.count(unit) == 1, (unit, sorted(units))
    assert Call.objects.filter(job_id=job.pk, stage="pages", unit=saved).exclude(pid=call.pid).exists()
    assert Published.objects.filter(job_id=job.pk).count() == 1
    assert Output.objects.filter(job_id=job.pk).count() == 10
    assert JobEvent.objects.filter(job=job, to_status="ready").count() == 1
    result = check_jobs(subprocess_env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_cancel_mid_stage_is_honoured_at_the_next_safe_point(platform, subprocess_env, tmp_path: Path):
    pause = tmp_path / "pause"
    pause.touch()
    job = new_job(pages=4, pause_file=str(pause), pause_at=2)
    wait_for(lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=2).exists(), timeout=60)
    assert Output.objects.filter(job_id=job.pk).count() == 2
    job_cancel(job_id=job.pk, actor_name="alice")
    job = wait_status(job, Status.CANCELLED, platform, timeout=30)
    # The cancel commits first; the worker's cleanup follows it and clears the pending marker.
    wait_for(lambda: reload(job).cleanup_from == "", timeout=30, what="cleanup finished")
    assert Output.objects.filter(job_id=job.pk).count() == 0
    assert Cleaned.objects.filter(job_id=job.pk).exists()
    scratch = Call.objects.get(job_id=job.pk, stage="pages", unit=2).note
    assert not Path(scratch).exists()
    assert ("finish_cancel", "worker") in JobEvent.objects.filter(job=job).values_list("name", "actor")
    result = check_jobs(subprocess_env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_worker_stuck_in_native_code_records_the_timeout_and_is_replaced(
    processes, subprocess_env, tmp_path: Path
):
    env = {**subprocess_env, "TEST_PAGES_DEADLINE": "1", "JOBS_STUCK_EXIT_SECONDS": "1"}
    processes.manage("qcluster", ["qcluster"], env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)  # dispatches the backoff
    job = new_job(pages=3, stuck_at=1)
    stuck = wait_for(
        lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=1).first(), timeout=60, what="page 1"
    )
    # The worker ends the stage at its deadline with a timeout, then leaves the process.
    wait_for(lambda: reload(job).error_code == "stage_timeout", timeout=20, what="timeout recorded")
    wait_for(lambda: not _alive(stuck.pid), timeout=20, what="stuck worker gone")
    # The job is retried by a fresh worker (which gets stuck again) and fails at the limit.
    job = wait_status(job, Status.FAILED, processes, timeout=60)
    assert job.error_code == "stage_timeout"
    pids = set(Call.objects.filter(job_id=job.pk, stage="pages", unit=1).values_list("pid", flat=True))
    assert len(pids) == 2, "each attempt ran in a different worker process"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except OSError:  # gone between the open and the read (ProcessLookupError), or before it
        return False
