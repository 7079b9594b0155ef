"""A worker that is shutting down hands its job back (jobs/drain.py): queued at its checkpoint,
no lease left, the attempt not counted, through the state machine.

The real signals and process trees are exercised on a real cluster in
tests/reliability/test_drain_cluster.py; these run the executor in this process and start the
drain the way the SIGTERM handler does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from jobs import drain, pipelines
from jobs.context import StageContext
from jobs.errors import TransitionRefused
from jobs.executor import run_job
from jobs.models import Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel
from jobs.services.worker import job_hand_back, job_report_progress, job_save_checkpoint
from tests.conftest import wait_for
from tests.jobs.helpers import new_job, reload, running
from tests.testapp.models import Call, Output
from tests.testapp.pipelines import KIND

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_engine")]


@pytest.fixture
def draining() -> Iterator[None]:
    """Ends the drain this process was put into (in a worker it lasts until the process exits)."""
    yield
    drain._draining.clear()


def _in_thread(job_id: object) -> threading.Thread:
    def work() -> None:
        try:
            run_job(job_id, worker="draining-worker")
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_hand_back_queues_the_job_at_its_checkpoint_without_a_lease_or_a_spent_attempt():
    claim = running(worker="w1")
    job_save_checkpoint(job_id=claim.job_id, token=claim.token, checkpoint={"next": 3})
    job_report_progress(job_id=claim.job_id, token=claim.token, done=3, total=5)
    before = reload(claim)

    job_hand_back(claim=claim)

    job = reload(claim)
    assert (job.status, job.stage, job.checkpoint) == (Status.QUEUED, "prepare", {"next": 3})
    assert (job.worker_token, job.lease_expires_at) == (None, None)
    assert job.attempt == before.attempt - 1  # the interrupted attempt is not counted
    assert job.progress == before.progress and job.processed == 3
    assert job.not_before is not None and job.not_before <= timezone.now()
    assert job.error_code == ""
    assert StageRun.objects.get(job=job).outcome == StageRun.Outcome.HANDED_BACK
    event = JobEvent.objects.filter(job=job, kind="transition").last()
    assert event is not None
    assert (event.name, event.from_status, event.to_status, event.actor) == (
        "hand_back",
        "running",
        "queued",
        "worker",
    )
    assert "handed back at its checkpoint" in event.reason


def test_a_job_handed_back_is_not_stalled_by_the_reaper_later():
    from jobs.services.reaper import reap

    claim = running()
    job_hand_back(claim=claim)
    report = reap(now=timezone.now() + timedelta(hours=1))
    assert claim.job_id not in report.stalled
    assert reload(claim).status == Status.QUEUED


def test_a_cancel_requested_job_is_not_handed_back():
    claim = running()
    job_cancel(job_id=claim.job_id)
    with pytest.raises(TransitionRefused):
        job_hand_back(claim=claim)
    assert reload(claim).status == Status.CANCEL_REQUESTED


def test_hand_back_writes_only_the_fields_it_declares(monkeypatch):
    job = reload(running())
    declared = Job.hand_back._django_fsm.get_transition(job.status).custom["writes"]
    assigned: set[str] = set()
    original = Job.__setattr__

    def watching(self: Job, attr: str, value: object) -> None:
        assigned.add(attr)
        original(self, attr, value)

    monkeypatch.setattr(Job, "__setattr__", watching)
    job.hand_back(now=timezone.now())
    monkeypatch.undo()
    assert assigned - {"status"} <= declared
    assert "checkpoint" not in declared and "stage" not in declared


def test_a_draining_worker_stops_at_the_next_safe_point_and_a_later_run_resumes(tmp_path: Path, draining):
    pause = tmp_path / "pause"
    pause.write_text("hold")
    job = new_job(pages=5, pause_file=str(pause), pause_at=2)
    thread = _in_thread(job.pk)
    wait_for(lambda: Call.objects.filter(job_id=job.pk, stage="pages", unit=2).exists(), what="page 2")

    drain.begin()  # what SIGTERM does in a q2 worker process
    thread.join(timeout=30)
    assert not thread.is_alive()

    job = reload(job)
    assert (job.status, job.stage, job.checkpoint, job.worker_token) == ("queued", "pages", {"next": 2}, None)
    assert job.attempt == 0
    assert StageRun.objects.get(job=job, stage="pages").outcome == StageRun.Outcome.HANDED_BACK
    assert not StageRun.objects.filter(job=job, outcome=StageRun.Outcome.FAILED).exists()

    # While draining nothing new is claimed.
    assert run_job(job.pk, worker="draining-worker") == "draining"
    assert reload(job).status == Status.QUEUED

    drain._draining.clear()  # a fresh worker
    pause.unlink()
    for _ in range(2):  # pages, then finish (another pool: queued in between)
        assert run_job(job.pk, worker="fresh-worker") == "done"
    job = reload(job)
    assert job.status == Status.READY
    pages = list(Call.objects.filter(job_id=job.pk, stage="pages").values_list("unit", flat=True))
    assert sorted(pages) == [0, 1, 2, 2, 3, 4]  # pages 0 and 1 were not done again
    assert Output.objects.filter(job_id=job.pk).count() == 5


def test_a_failure_caused_by_the_shutdown_is_a_hand_back_not_a_failure(draining):
    """A group SIGTERM also kills the stage's child processes (OCR, sandbox): the error that
    surfaces is the shutdown's, so it must not spend an attempt nor fail the document."""
    original = pipelines.get(KIND)

    def child_killed(ctx: StageContext) -> None:
        drain.begin()  # the SIGTERM reached this worker ...
        raise RuntimeError("child process exited with -15")  # ... and its child

    stages = tuple(replace(s, handler=child_killed) if s.name == "prepare" else s for s in original.stages)
    pipelines.register(replace(original, stages=stages))
    try:
        job = new_job(pages=1)
        run_job(job.pk, worker="w1")
    finally:
        pipelines.register(original)
    job = reload(job)
    assert (job.status, job.stage, job.error_code, job.attempt) == ("queued", "prepare", "", 0)
    assert StageRun.objects.get(job=job).outcome == StageRun.Outcome.HANDED_BACK


def test_a_batch_in_flight_when_the_drain_begins_commits_with_its_checkpoint_then_the_stage_stops(draining):
    """The checkpoint is the drain's safe point: work already done is saved, none is started."""
    original = pipelines.get(KIND)
    after: list[int] = []

    def two_batches(ctx: StageContext) -> None:
        with ctx.write(checkpoint={"next": 1}):
            Output.objects.create(job_id=ctx.job_id, key="batch-0", worker_token=ctx.token)
            drain.begin()  # SIGTERM arrives while the batch is being written
        after.append(1)  # never reached: the stage stops once the batch has committed
        with ctx.write(checkpoint={"next": 2}):
            Output.objects.create(job_id=ctx.job_id, key="batch-1", worker_token=ctx.token)

    stages = tuple(replace(s, handler=two_batches) if s.name == "prepare" else s for s in original.stages)
    pipelines.register(replace(original, stages=stages))
    try:
        job = new_job(pages=1)
        run_job(job.pk, worker="w1")
    finally:
        pipelines.register(original)
    job = reload(job)
    assert (job.status, job.checkpoint, job.worker_token) == ("queued", {"next": 1}, None)
    assert list(Output.objects.filter(job_id=job.pk).values_list("key", flat=True)) == ["batch-0"]
    assert after == []
