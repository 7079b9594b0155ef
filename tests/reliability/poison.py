"""A job kind whose only stage kills the worker process running it, every time.

q2 workers import this module at startup through ``JOBS_PIPELINE_MODULES=tests.reliability.poison``;
the test process imports it to create jobs of the kind. The handler refuses to run in a main
process, so that running it in-process by mistake fails the job instead of killing the test run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal

from jobs import pipelines
from jobs.context import StageContext
from jobs.errors import INTERNAL_ERROR, StageFailure
from jobs.pipelines import Pipeline, Stage

KIND = "reliability.poison"


def explode(ctx: StageContext) -> None:
    if multiprocessing.current_process().name == "MainProcess":
        raise StageFailure(INTERNAL_ERROR.code, "the poison stage only runs in a forked q2 worker")
    ctx.check()
    # Like a native crash or the OOM killer: no exception, no cleanup, no goodbye.
    os.kill(os.getpid(), signal.SIGKILL)


def register() -> Pipeline:
    return pipelines.register(
        Pipeline(
            kind=KIND,
            label="Poison (kills its worker)",
            # Resumable, so the reaper recovers it automatically while attempts remain.
            stages=(Stage("explode", explode, weight=100, deadline=30, resumable=True),),
        )
    )


register()
