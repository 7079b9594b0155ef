"""``ops.hold``: a first stage that is not resumable and holds while a file exists, then a last.

The takeover test kills a worker inside ``hold`` so the reaper leaves the job to an operator
(the toy pipeline's ``prepare`` is not resumable either, but it is over in a millisecond). The
workers load this module through ``JOBS_PIPELINE_MODULES``; importing it registers the kind.
Each attempt records its process id in ``tests.testapp.models.Call``, as the toy pipeline does.
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs import pipelines
from jobs.context import StageContext
from jobs.pipelines import Pipeline, Stage
from tests.testapp.models import Call
from tests.timing import hold_for

KIND = "ops.hold"


def hold(ctx: StageContext) -> None:
    Call.objects.create(job_id=ctx.job_id, stage="hold", unit=ctx.attempt, pid=os.getpid())
    pause = ctx.input.get("pause_file")
    while pause and Path(pause).exists():
        ctx.touch()  # holding on purpose, not hung
        ctx.check()
        hold_for(0.05)


def finish(ctx: StageContext) -> None:
    Call.objects.create(job_id=ctx.job_id, stage="finish", unit=ctx.attempt, pid=os.getpid())


pipelines.register(
    Pipeline(
        kind=KIND,
        stages=(
            Stage("hold", hold, weight=50, deadline=60, resumable=False),
            Stage("finish", finish, weight=50, deadline=60),
        ),
    )
)
