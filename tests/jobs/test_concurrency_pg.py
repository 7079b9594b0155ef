"""Races on real PostgreSQL with real threads: claims, takeovers, cancels, stale operators.

Each thread has its own connection (Django's are per thread), so these are true concurrent
transactions; a barrier releases them together.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.errors import JobConflict, LeaseLost
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel, job_take_over
from jobs.services.reaper import reap
from jobs.services.worker import (
    Report,
    fenced,
    job_claim,
    job_complete_stage,
    job_heartbeat,
    job_report_progress,
    job_save_checkpoint,
)
from tests.conftest import race
from tests.jobs.helpers import new_job, reload, running
from tests.testapp.models import Output
from tests.testapp.pipelines import KIND

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# The ways a fenced batch takes the job row's lock before its outputs: a lock of its own, or the
# UPDATE under the lease that saves its checkpoint, or its checkpoint and progress.
BATCHES = {
    "lock": {},
    "checkpoint": {"checkpoint": {"next": 1}},
    "checkpoint and progress": {
        "checkpoint": {"next": 1},
        "report": Report(done=1, total=2, stage=(KIND, "prepare"), event=True),
    },
}
batches = pytest.mark.parametrize("batch", BATCHES.values(), ids=BATCHES.keys())


def test_many_claimers_exactly_one_winner():
    for _ in range(5):
        job = new_job()
        results = race([lambda i=i, pk=job.pk: job_claim(job_id=pk, worker=f"w{i}") for i in range(12)])
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, results
        assert reload(job).worker_token == winners[0].token
        assert StageRun.objects.filter(job=job).count() == 1
        assert JobEvent.objects.filter(job=job, name="claim").count() == 1


@batches
def test_a_taken_over_worker_cannot_heartbeat_report_write_or_complete(batch):
    zombie = running(worker="zombie")
    reap(now=timezone.now() + timedelta(minutes=5))  # prepare is not resumable: left stalled
    job = reload(zombie)
    assert job.status == Status.STALLED
    job_take_over(job_id=job.pk, actor_name="ops", expected_version=job.version)
    successor = job_claim(job_id=job.pk, worker="successor")
    assert successor is not None

    assert not job_heartbeat(job_id=job.pk, token=zombie.token).alive
    with pytest.raises(LeaseLost):
        job_report_progress(job_id=job.pk, token=zombie.token, done=1, total=2)
    with pytest.raises(LeaseLost):
        job_save_checkpoint(job_id=job.pk, token=zombie.token, checkpoint={"next": 99})
    with pytest.raises(LeaseLost), fenced(job_id=job.pk, token=zombie.token, **batch):
        Output.objects.create(job_id=job.pk, key="zombie", worker_token=zombie.token)
    with pytest.raises(JobConflict):
        job_complete_stage(claim=zombie)

    job = reload(job)
    assert (job.status, job.worker_token, job.checkpoint) == ("running", successor.token, {})
    assert (job.processed, job.total) == (None, None)
    assert not Output.objects.filter(job_id=job.pk).exists()


@batches
def test_a_stalled_jobs_zombie_cannot_open_a_fenced_batch_around_a_takeover(batch):
    zombie = running(worker="zombie")
    reap(now=timezone.now() + timedelta(minutes=5))
    job = reload(zombie)
    in_batch = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def zombie_writes() -> None:
        with fenced(job_id=job.pk, token=zombie.token, **batch):
            in_batch.set()
            release.wait(5)
            Output.objects.create(job_id=job.pk, key="before-takeover", worker_token=zombie.token)
        order.append("batch committed")

    def operator() -> None:
        in_batch.wait(5)
        job_take_over(job_id=job.pk, actor_name="ops", expected_version=job.version)
        order.append("takeover committed")

    # The stalled job's token is still the zombie's until the takeover revokes it; a stalled job
    # is not leased though, so the fence already refuses the batch.
    results = race([zombie_writes, operator, lambda: (in_batch.wait(5), release.set())])
    assert isinstance(results[0], LeaseLost)
    assert order == ["takeover committed"]
    assert not Output.objects.filter(job_id=job.pk).exists()


@batches
def test_a_cancel_waits_for_a_running_workers_fenced_batch_to_commit(batch):
    claim = running(worker="slow")
    in_batch = threading.Event()
    order: list[str] = []

    def worker_batch() -> None:
        with fenced(job_id=claim.job_id, token=claim.token, **batch):
            in_batch.set()
            threading.Event().wait(0.5)  # the takeover is blocked meanwhile
            Output.objects.create(job_id=claim.job_id, key="batch", worker_token=claim.token)
            order.append("batch")

    def cancel() -> None:
        in_batch.wait(5)
        job_cancel(job_id=claim.job_id)
        order.append("cancel")

    results = race([worker_batch, cancel])
    assert results == [None, None]
    assert order == ["batch", "cancel"]
    job = reload(claim)
    assert job.status == Status.CANCEL_REQUESTED
    assert job.checkpoint == batch.get("checkpoint", {})
    assert Output.objects.filter(job_id=claim.job_id, key="batch").exists()


def test_cancel_racing_completion_ends_in_exactly_one_state():
    outcomes = set()
    for _ in range(8):
        claim = running()
        # Bring the job to its last stage so completion means publish.
        nxt = job_complete_stage(claim=claim, continue_inline=True)
        last = job_complete_stage(claim=nxt, continue_inline=True)
        job_id = claim.job_id
        results = race(
            [lambda last=last: job_complete_stage(claim=last), lambda j=job_id: job_cancel(job_id=j)]
        )
        job = reload(claim)
        completed, cancelled = results
        if isinstance(completed, Exception):
            assert job.status == Status.CANCEL_REQUESTED and not isinstance(cancelled, Exception)
        else:
            assert job.status == Status.READY and isinstance(cancelled, JobConflict)
        assert JobEvent.objects.filter(job=job, to_status__in=["ready", "cancel_requested"]).count() == 1
        outcomes.add(job.status)
    assert outcomes <= {Status.READY, Status.CANCEL_REQUESTED}


def test_operators_on_the_same_stale_page_one_wins_the_other_gets_a_conflict():
    running(worker="lost")
    reap(now=timezone.now() + timedelta(minutes=5))
    job = Job.objects.get(status=Status.STALLED)
    seen = job.version
    results = race(
        [
            lambda n=n: job_take_over(job_id=job.pk, actor_name=n, expected_version=seen)
            for n in ("ann", "bob")
        ]
    )
    assert sum(isinstance(r, JobConflict) for r in results) == 1
    assert JobEvent.objects.filter(job=job, name="take_over").count() == 1


def test_concurrent_progress_reports_never_lower_progress():
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)  # into "pages" (weight 80)
    reports = [
        lambda d=d: job_report_progress(job_id=nxt.job_id, token=nxt.token, done=d, total=40)
        for d in range(1, 41)
    ]
    for _ in range(3):
        race(reports[::-1] + reports)
    job = reload(claim)
    assert job.progress == pytest.approx(10 + 80)
    values = list(JobEvent.objects.filter(job=job, kind="progress").values_list("progress", flat=True))
    assert values == sorted(values)
