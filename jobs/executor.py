"""Running stages: claim, watchdog (heartbeat + deadline), handler, outcome.

Called by the q2 task (``jobs.tasks.run_job``); the job table is the truth, so a duplicate or
late delivery finds nothing to claim and returns quietly.
"""

from __future__ import annotations

import logging
from typing import Any

from jobs import drain, pipelines
from jobs.context import StageContext
from jobs.dispatch import dispatch
from jobs.errors import CancelRequested, JobConflict, LeaseLost, WorkerDraining
from jobs.models import Job, Status
from jobs.outcomes import fail, settle_conflict
from jobs.services.worker import (
    Claim,
    job_claim,
    job_complete_stage,
    job_finish_cancel,
    job_hand_back,
)
from jobs.watchdog import watchdog

log = logging.getLogger(__name__)


def _hand_back(claim: Claim) -> None:
    """The worker is draining: queue the job again at its checkpoint (a cancel that arrived
    meanwhile is finished instead, through the conflict)."""
    try:
        job_hand_back(claim=claim)
    except JobConflict:
        settle_conflict(claim)
    else:
        log.warning("job %s: worker shutting down; handed back at its checkpoint", claim.job_id)


def run_stage(claim: Claim, *, exit_when_stuck: bool = False) -> Claim | None:
    """Run the claimed stage and record its outcome; returns the next claim to run inline.

    ``exit_when_stuck`` (q2 worker processes only) lets the watchdog end the process when a
    handler stays stuck past its deadline in code that cannot be interrupted.
    """
    with drain.holding(claim):  # until its outcome is recorded: the drain's guard may hand it back
        return _run_stage(claim, exit_when_stuck=exit_when_stuck)


def _run_stage(claim: Claim, *, exit_when_stuck: bool) -> Claim | None:
    if drain.draining():
        _hand_back(claim)  # an inline continuation claimed just before the drain began
        return None
    pipeline = pipelines.get(claim.job.kind)
    stage = pipeline.stage(claim.job.stage)
    ctx = StageContext(claim, pipeline, stage)
    dog = watchdog()
    watch = dog.watch(ctx, exit_when_stuck=exit_when_stuck)
    try:
        try:
            stage.handler(ctx)
            ctx.check()  # a cancel that arrived during the last step is honoured before moving on
        finally:
            dog.unwatch(watch)
            ctx.close()
    except CancelRequested:
        try:
            job_finish_cancel(claim=claim)
        except JobConflict:
            settle_conflict(claim)
        return None
    except LeaseLost:
        log.info("job %s: lease lost during %s, stepping back", claim.job_id, stage.name)
        return None
    except WorkerDraining:
        _hand_back(claim)
        return None
    except Exception as error:
        if ctx.timed_out.is_set():
            return None  # the watchdog already recorded the timeout
        if drain.draining():
            # The shutdown itself is the likely cause (a group SIGTERM also ends the stage's own
            # child processes): not a failure of the input, so no attempt is spent.
            log.warning("job %s: %s during the drain; handing back", claim.job_id, type(error).__name__)
            _hand_back(claim)
            return None
        fail(claim, error)
        return None
    nxt, _passed = pipeline.stages_to_pass(stage.name, ctx.skip_next)
    try:
        return job_complete_stage(
            claim=claim,
            skipped=ctx.skipped,
            continue_inline=nxt is not None and nxt.pool == stage.pool,
            skip_next=ctx.skip_next,
        )
    except JobConflict:
        settle_conflict(claim)
        return None
    except Exception as error:  # the publish hook refused (e.g. a newer version is published)
        fail(claim, error)
        return None


def run_job(job_id: Any, *, worker: str | None = None, exit_when_stuck: bool = False) -> str:
    """Claim the job and run its stages (continuing inline while they share a pool)."""
    with drain.working():
        if drain.draining():
            # This process is shutting down: leave the job queued and hand its delivery on to
            # whichever worker comes next.
            if Job.objects.filter(pk=job_id, status=Status.QUEUED).exists():
                dispatch(job_id)
            return "draining"
        claim = job_claim(job_id=job_id, worker=worker)
        if claim is None:
            return "not claimed"
        while claim is not None:
            claim = run_stage(claim, exit_when_stuck=exit_when_stuck)
        return "done"
