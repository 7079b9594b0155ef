"""What a stage handler writes through its context: fenced batches with checkpoint and progress."""

from __future__ import annotations

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


def test_a_batch_commits_its_outputs_checkpoint_and_progress_in_one_transaction():
    ctx = context()
    before = reload(ctx.claim).progress
    with CaptureQueriesContext(connection) as captured, ctx.write(checkpoint={"next": 2}, done=2, total=4):
        Output.objects.create(job_id=ctx.job_id, key="page-1", worker_token=ctx.token)
    job = reload(ctx.claim)
    assert job.checkpoint == {"next": 2}
    assert (job.processed, job.total) == (2, 4)
    assert job.progress == ctx.pipeline.progress_at(ctx.stage.name, 2, 4) > before
    event = JobEvent.objects.filter(job=job, kind="progress").get()
    assert (event.processed, event.total, event.progress, event.stage) == (2, 4, job.progress, job.stage)
    # The lease check, the output, the checkpoint, the progress, the event's slot and the event:
    # no transaction of the progress report's own, and no read of the job's kind and stage.
    # (SAVEPOINT and RELEASE are the test's own transaction around the batch's.)
    statements = [
        q["sql"] for q in captured.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    assert len(statements) == 6, [sql[:60] for sql in statements]
    # The claimed copy follows the worker's own writes.
    assert (ctx.job.checkpoint, ctx.job.processed, ctx.job.total) == ({"next": 2}, 2, 4)


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
