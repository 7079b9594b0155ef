"""The toy pipeline ``test.pages``: prepare -> pages (resumable, checkpointed) -> finish.

Its behaviour is steered by the job's payload: ``pages`` (count), ``page_sleep`` (seconds per
page), ``fail`` (a cause code raised at the first page), ``hang_at`` (a page where the handler
stops making progress), ``stuck_at`` (a page where it blocks in one uninterruptible call),
``pause_file`` and ``pause_at`` (page ``pause_at`` waits at a safe point while that file exists).
"""

from __future__ import annotations

import os
from pathlib import Path

from jobs import pipelines
from jobs.context import StageContext
from jobs.errors import StageFailure
from jobs.models import Job
from jobs.pipelines import Pipeline, Stage
from jobs.retry import RetryRule
from tests.testapp.models import Call, Cleaned, Output, Published
from tests.timing import hold_for

KIND = "test.pages"
NOOP_KIND = "test.noop"


def prepare(ctx: StageContext) -> None:
    ctx.check()
    Call.objects.create(job_id=ctx.job_id, stage="prepare", unit=0, pid=os.getpid())
    if ctx.input.get("skip_prepare"):
        ctx.skip()


def pages(ctx: StageContext) -> None:
    payload = ctx.input
    total = int(payload.get("pages", 5))
    start = int(ctx.checkpoint.get("next", 0))
    for page in range(start, total):
        ctx.check()
        scratch = ctx.temp_dir / f"page-{page}.tmp"
        scratch.write_text("work in progress")
        Call.objects.create(job_id=ctx.job_id, stage="pages", unit=page, pid=os.getpid(), note=str(scratch))
        pause = payload.get("pause_file")
        while pause and page == payload.get("pause_at", 0) and Path(pause).exists():
            ctx.touch()  # waiting on purpose, not hung
            ctx.check()
            hold_for(0.05)
        if payload.get("fail"):
            raise StageFailure(payload["fail"], "told to fail", retry_after=payload.get("retry_after"))
        if payload.get("hang_at") == page:
            while True:  # makes no progress: the watchdog must end this
                hold_for(0.05)
        if payload.get("stuck_at") == page:
            hold_for(3600)  # one long C call: like a parser hung in native code
        hold_for(float(payload.get("page_sleep", 0)))
        with ctx.write(checkpoint={"next": page + 1}):
            Output.objects.create(job_id=ctx.job_id, key=f"page-{page}", worker_token=ctx.token)
        ctx.progress(page + 1, total)


def finish(ctx: StageContext) -> None:
    Call.objects.create(job_id=ctx.job_id, stage="finish", unit=0, pid=os.getpid())


def publish(job: Job) -> None:
    Published.objects.create(job_id=job.pk)


def cleanup(job: Job, from_stage: str) -> None:
    Output.objects.filter(job_id=job.pk).delete()
    Cleaned.objects.create(job_id=job.pk, from_stage=from_stage)


def noop(ctx: StageContext) -> None:
    return None


def register_all() -> None:
    deadline = float(os.environ.get("TEST_PAGES_DEADLINE", "2"))
    pipelines.register(
        Pipeline(
            kind=KIND,
            stages=(
                Stage("prepare", prepare, weight=10, deadline=30, resumable=False),
                Stage(
                    "pages",
                    pages,
                    weight=80,
                    deadline=deadline,
                    resumable=True,
                    retry={"embedding_rate_limited": RetryRule(max_attempts=3, base_delay=0.1, max_delay=1)},
                ),
                Stage("finish", finish, weight=10, deadline=30, pool="other"),
            ),
            publish=publish,
            cleanup=cleanup,
        )
    )
    pipelines.register(
        Pipeline(kind=NOOP_KIND, stages=tuple(Stage(f"s{i}", noop, weight=20) for i in range(5)))
    )
