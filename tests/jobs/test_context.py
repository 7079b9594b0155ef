"""What a stage handler writes through its context: fenced batches with checkpoint and progress."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import pipelines
from jobs.context import StageContext
from jobs.models import JobEvent
from tests.jobs.helpers import reload, running
from tests.testapp.models import Output
from tests.testapp.pipelines import KIND

pytestmark = pytest.mark.django_db


def context() -> StageContext:
    claim = running(pages=4)
    pipeline = pipelines.get(KIND)
    return StageContext(claim, pipeline, pipeline.stage(claim.job.stage))


def statements_of(batch: Callable[[], None]) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        batch()
    # SAVEPOINT and RELEASE are the test's own transaction around the batch's.
    return [q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]


def batch(ctx: StageContext, page: int, total: int = 4) -> Callable[[], None]:
    def write() -> None:
        with ctx.write(checkpoint={"next": page}, done=page, total=total):
            Output.objects.create(job_id=ctx.job_id, key=f"page-{page}", worker_token=ctx.token)

    return write


def test_a_batch_commits_its_outputs_checkpoint_and_progress_in_one_transaction():
    ctx = context()
    before = reload(ctx.claim).progress
    statements = statements_of(batch(ctx, 2))
    job = reload(ctx.claim)
    assert job.checkpoint == {"next": 2}
    assert (job.processed, job.total) == (2, 4)
    assert job.progress == ctx.pipeline.progress_at(ctx.stage.name, 2, 4) > before
    event = JobEvent.objects.filter(job=job, kind="progress").get()
    assert (event.processed, event.total, event.progress, event.stage) == (2, 4, job.progress, job.stage)
    # Checkpoint, progress and the event's slot in one UPDATE under the lease (which is also the
    # lease check and takes the row's lock before the output), the event, the output: no
    # transaction of the report's own, no read of the job's kind and stage.
    assert len(statements) == 3, [sql[:60] for sql in statements]
    assert statements[0].startswith('UPDATE "jobs_job"') and "testapp_output" in statements[-1]


def test_batches_in_quick_succession_throttle_their_progress_but_never_the_last(settings):
    settings.JOBS_PROGRESS_WRITE_SECONDS = settings.JOBS_PROGRESS_EVENT_SECONDS = 60
    ctx = context()
    statements_of(batch(ctx, 1))
    # Within JOBS_PROGRESS_WRITE_SECONDS: the checkpoint is saved, the progress waits.
    assert len(statements_of(batch(ctx, 2))) == 2  # the checkpoint under the lease, the output
    job = reload(ctx.claim)
    assert (job.checkpoint, job.processed) == ({"next": 2}, 1)
    # The last unit is always written; no event check while this worker's last event is recent.
    assert len(statements_of(batch(ctx, 4))) == 2  # checkpoint and progress under the lease, output
    job = reload(ctx.claim)
    assert (job.checkpoint, job.processed, job.total) == ({"next": 4}, 4, 4)
    assert job.progress == ctx.pipeline.progress_at(ctx.stage.name, 4, 4)
    assert JobEvent.objects.filter(job=job, kind="progress").count() == 1


def test_a_batch_that_fails_leaves_outputs_checkpoint_and_progress_as_they_were():
    ctx = context()
    before = reload(ctx.claim)

    def failing_batch() -> None:
        with ctx.write(checkpoint={"next": 2}, done=2, total=4):
            Output.objects.create(job_id=ctx.job_id, key="page-1", worker_token=ctx.token)
            raise RuntimeError("the batch's writer failed")

    with pytest.raises(RuntimeError):
        failing_batch()
    job = reload(ctx.claim)
    assert (job.checkpoint, job.progress, job.processed) == (before.checkpoint, before.progress, None)
    assert not Output.objects.filter(job_id=job.pk).exists()
    assert not JobEvent.objects.filter(job=job, kind="progress").exists()
    assert ctx.checkpoint == {}
