"""Running stages: claim, watchdog (heartbeat + deadline), handler, outcome.

Called by the q2 task (``jobs.tasks.run_job``); the job table is the truth, so a duplicate or
late delivery finds nothing to claim and returns quietly.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection

from jobs import drain, pipelines
from jobs.context import StageContext
from jobs.dispatch import dispatch
from jobs.errors import CancelRequested, JobConflict, LeaseLost, StageTimeout, WorkerDraining
from jobs.models import Job, Status
from jobs.services.worker import (
    Claim,
    job_claim,
    job_complete_stage,
    job_fail_stage,
    job_finish_cancel,
    job_hand_back,
    job_heartbeat,
)

log = logging.getLogger(__name__)


class Watchdog(threading.Thread):
    """Renews the lease, learns of cancel requests and ends a stage that stopped progressing.

    A live heartbeat must not keep a hung stage alive: past the stage's no-progress deadline the
    watchdog records the timeout itself (a fenced transition, so it wins or loses cleanly against
    the handler) and raises :class:`StageTimeout` inside the handler's thread.
    """

    def __init__(self, ctx: StageContext, *, exit_when_stuck: bool = False) -> None:
        super().__init__(name=f"watchdog-{ctx.job_id}", daemon=True)
        self.ctx = ctx
        self._stop_event = threading.Event()
        self.interval = float(settings.JOBS_HEARTBEAT_SECONDS)
        self.exit_when_stuck = exit_when_stuck

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)

    def run(self) -> None:
        try:
            self._loop()
        except Exception:
            log.exception("watchdog of job %s failed", self.ctx.job_id)
        finally:
            connection.close()

    def _loop(self) -> None:
        ctx = self.ctx
        tick = min(self.interval, max(0.05, ctx.stage.deadline / 4), 1.0)
        since_beat = 0.0
        while not self._stop_event.wait(tick):
            since_beat += tick
            if ctx.seconds_since_progress() > ctx.stage.deadline:
                self._time_out()
                return
            if since_beat < self.interval:
                continue
            since_beat = 0.0
            try:
                answer = job_heartbeat(job_id=ctx.job_id, token=ctx.token)
            except DatabaseError:
                # A database blip: keep watching and beat again next time; the lease (three
                # beats long) rides over it, and a longer outage lets the reaper decide.
                log.warning("job %s: heartbeat failed; retrying", ctx.job_id)
                connection.close()
                continue
            if not answer.alive:
                ctx.lease_lost.set()
                return
            if answer.cancel_requested:
                ctx.cancel_requested.set()

    def _time_out(self) -> None:
        ctx = self.ctx
        ctx.timed_out.set()
        error = StageTimeout(
            f"no progress for {ctx.stage.deadline:.0f}s in stage {ctx.stage.name}",
            cause=ctx.stage.timeout_cause,
        )
        _fail(ctx.claim, error)
        # Unwind the handler at its next bytecode. Its writes are already fenced out by the
        # transition above, so only the worker slot is at stake if it does not unwind.
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ctx.handler_thread), ctypes.py_object(StageTimeout)
        )
        grace = float(settings.JOBS_STUCK_EXIT_SECONDS)
        if self.exit_when_stuck and not self._stop_event.wait(grace):
            # Stuck in C code (a parser hang): the process cannot be saved, so it exits and the
            # q2 cluster starts a fresh worker in its place.
            log.critical(
                "job %s: handler still stuck %ss after its deadline; worker exits", ctx.job_id, grace
            )
            os._exit(70)


def _fail(claim: Claim, error: BaseException) -> None:
    """Record the stage's failure; when that compare-and-set loses, settle what is left."""
    try:
        job_fail_stage(claim=claim, error=error)
    except JobConflict:
        _settle_conflict(claim)


def _settle_conflict(claim: Claim) -> None:
    """An outcome lost its compare-and-set. If a cancel arrived meanwhile and the lease is still
    ours, finish it; otherwise someone else owns the job now and we step back."""
    job = Job.objects.filter(pk=claim.job_id).first()
    if job is not None and job.status == Status.CANCEL_REQUESTED and job.worker_token == claim.token:
        try:
            job_finish_cancel(claim=claim)
        except JobConflict:
            log.info("job %s: cancel finished by someone else", claim.job_id)
    else:
        log.info("job %s: lease lost, stepping back", claim.job_id)


def _hand_back(claim: Claim) -> None:
    """The worker is draining: queue the job again at its checkpoint (a cancel that arrived
    meanwhile is finished instead, through the conflict)."""
    try:
        job_hand_back(claim=claim)
    except JobConflict:
        _settle_conflict(claim)
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
    watchdog = Watchdog(ctx, exit_when_stuck=exit_when_stuck)
    watchdog.start()
    try:
        try:
            stage.handler(ctx)
            ctx.check()  # a cancel that arrived during the last step is honoured before moving on
        finally:
            watchdog.stop()
            ctx.close()
    except CancelRequested:
        try:
            job_finish_cancel(claim=claim)
        except JobConflict:
            _settle_conflict(claim)
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
        _fail(claim, error)
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
        _settle_conflict(claim)
        return None
    except Exception as error:  # the publish hook refused (e.g. a newer version is published)
        _fail(claim, error)
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
