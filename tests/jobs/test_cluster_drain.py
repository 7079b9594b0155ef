"""The drain's other two ways in, on a real django-q2 cluster with the toy pipeline (tests/testapp):
a leader killed outright (SIGKILL: no chance to drain anything itself) and SIGTERM to one worker.

SIGTERM mid-OCR to the leader and to the whole process group is in
tests/reliability/test_drain_cluster.py. No reaper runs here: only the hand-back can queue the job
again before its (long) lease would expire.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from jobs.models import Job, StageRun, Status
from tests.conftest import Processes, wait_for
from tests.jobs.helpers import new_job, reload
from tests.reliability.helpers import alive, descendants
from tests.testapp.models import Call

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

DRAIN_SECONDS = 6
SLACK = 5  # polling and a loaded machine; an orphan (the finding) lives for ever


@pytest.fixture
def env(subprocess_env: dict[str, str]) -> dict[str, str]:
    return {**subprocess_env, "JOBS_DRAIN_SECONDS": str(DRAIN_SECONDS), "JOBS_LEASE_SECONDS": "120"}


def _page(job: Job, unit: int) -> Call | None:
    return Call.objects.filter(job_id=job.pk, stage="pages", unit=unit).first()


def _handed_back(job: Job) -> dict[str, int]:
    job = reload(job)
    runs = list(StageRun.objects.filter(job=job).values_list("stage", "outcome"))
    assert job.status == Status.QUEUED, (job.status, runs)
    assert (job.stage, job.worker_token, job.lease_expires_at, job.error_code) == ("pages", None, None, "")
    assert ("pages", StageRun.Outcome.HANDED_BACK) in runs, runs
    return dict(job.checkpoint)


def test_a_leader_killed_outright_takes_its_whole_tree_down_through_the_drain(
    processes: Processes, env: dict[str, str]
) -> None:
    cluster = processes.manage("qcluster", ["qcluster"], env)
    job = new_job(pages=60, page_sleep=0.2)
    wait_for(lambda: _page(job, 3), timeout=60, what="page 3")
    tree = [cluster.pid, *descendants(cluster.pid)]
    assert len(tree) >= 5, tree

    os.kill(cluster.pid, signal.SIGKILL)  # the sentinel learns of it by the parent-death signal
    left = lambda: [pid for pid in tree if alive(pid)]  # noqa: E731
    wait_for(lambda: not left(), timeout=DRAIN_SECONDS + SLACK, what=f"the orphaned tree to exit: {left()}")
    assert _handed_back(job).get("next", 0) >= 3, processes.logs()


def test_sigterm_to_one_worker_hands_its_job_back_and_a_fresh_worker_finishes_it(
    processes: Processes, env: dict[str, str], tmp_path: Path
) -> None:
    cluster = processes.manage("qcluster", ["qcluster"], env)
    job = new_job(pages=12, page_sleep=0.2)
    call = wait_for(lambda: _page(job, 3), timeout=60, what="page 3")
    os.kill(call.pid, signal.SIGTERM)
    wait_for(lambda: not alive(call.pid), timeout=DRAIN_SECONDS + SLACK, what="the worker to exit")
    wait_for(lambda: reload(job).status == Status.READY, timeout=60, what="the job to finish")
    job = reload(job)
    runs = list(StageRun.objects.filter(job=job, stage="pages").values_list("outcome", flat=True))
    assert runs == [StageRun.Outcome.HANDED_BACK, StageRun.Outcome.ADVANCED], runs
    pages = list(Call.objects.filter(job_id=job.pk, stage="pages").values_list("unit", flat=True))
    # The page in flight at the signal was finished and checkpointed before the stage stopped.
    assert sorted(pages) == list(range(12)), pages
    assert alive(cluster.pid)  # the cluster went on: the sentinel started a fresh worker
