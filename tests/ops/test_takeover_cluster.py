"""A job that stalls for real and is taken over from the admin.

A real ``manage.py qcluster`` runs the job; its worker process is SIGKILLed inside a stage that is
not resumable. No reaper process runs: the test runs one reaper pass itself once the lease has
expired, so the job is left stalled for an operator. An operator with the takeover permission
takes it over from the stalled list; the cluster then finishes it, and the killed worker's lease
token is refused everywhere (heartbeat, checkpoint, progress, fenced output batches).
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.errors import LeaseLost
from jobs.models import Job, JobEvent, Status
from jobs.services.lifecycle import job_create
from jobs.services.reaper import reap
from jobs.services.worker import fenced, job_heartbeat, job_report_progress, job_save_checkpoint
from tests.conftest import Processes, wait_for
from tests.ops import holding_pipeline
from tests.ops.conftest import TAKEOVER, VIEW, login, make_staff
from tests.ops.helpers import STALLED, act, messages_of, short
from tests.testapp.models import Call

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def reload(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_killed_workers_job_is_stalled_taken_over_by_an_operator_and_finishes(
    processes: Processes, subprocess_env: dict[str, str], tmp_path: Path
):
    env = {**subprocess_env, "JOBS_PIPELINE_MODULES": "tests.ops.holding_pipeline"}
    processes.manage("qcluster", ["qcluster"], env)
    pause = tmp_path / "hold"
    pause.touch()
    job = job_create(
        kind=holding_pipeline.KIND,
        tenant="acme",
        subject_id=str(uuid.uuid4()),
        payload={"pause_file": str(pause)},
    )

    call = wait_for(
        lambda: Call.objects.filter(job_id=job.pk, stage="hold").first(), timeout=60, what="the hold stage"
    )
    running = reload(job)
    assert running.status == Status.RUNNING and running.worker_token
    old_token, lost_name = running.worker_token, running.worker_name
    assert lost_name.endswith(f":{call.pid}")
    os.kill(call.pid, signal.SIGKILL)

    # No heartbeat renews the lease now; once it has expired, one reaper pass stalls the job and,
    # the stage not being resumable, leaves it for an operator.
    expires = running.lease_expires_at
    assert expires is not None
    wait_for(
        lambda: timezone.now() > (reload(job).lease_expires_at or expires), timeout=30, what="lease expiry"
    )
    report = reap()
    assert report.stalled == [job.pk] and report.left_for_operator == [job.pk], report
    stalled = reload(job)
    assert (stalled.status, stalled.lost_worker, stalled.stage) == (Status.STALLED, lost_name, "hold")

    operator = login(make_staff("oncall", VIEW, TAKEOVER))
    listing = operator.get(STALLED).content.decode()
    assert short(job) in listing and lost_name in listing
    pause.unlink()  # the next attempt must not hold
    response = act(operator, "take_over", [stalled], url=STALLED, reason="worker OOM-killed, see INC-42")
    assert messages_of(response) == [f"1 job taken over: {short(job)}."]

    try:
        wait_for(lambda: reload(job).status == Status.READY, timeout=60, what="ready")
    except AssertionError:
        raise AssertionError(f"job is {reload(job).status}/{reload(job).stage}\n{processes.logs()}") from None

    # The killed worker's token is fenced out of every write.
    assert job_heartbeat(job_id=job.pk, token=old_token).alive is False
    with pytest.raises(LeaseLost):
        job_save_checkpoint(job_id=job.pk, token=old_token, checkpoint={"late": True})
    with pytest.raises(LeaseLost):
        job_report_progress(job_id=job.pk, token=old_token, done=1, total=1)
    with pytest.raises(LeaseLost), fenced(job_id=job.pk, token=old_token):
        pass
    assert reload(job).checkpoint != {"late": True}

    takeover = JobEvent.objects.get(job=job, name="take_over")
    assert (takeover.actor, takeover.actor_name, takeover.reason) == (
        "operator",
        "oncall",
        "worker OOM-killed, see INC-42",
    )
    holds = Call.objects.filter(job_id=job.pk, stage="hold")
    assert holds.count() == 2 and holds.exclude(pid=call.pid).count() == 1  # a new process ran it
    assert Call.objects.filter(job_id=job.pk, stage="finish").count() == 1
