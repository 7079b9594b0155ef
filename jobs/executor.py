"""Running stages: claim, watchdog (heartbeat + deadline), handler, outcome.

Called by the q2 task (``jobs.tasks.run_job``); the job table is the truth, so a duplicate or
late delivery finds nothing to claim and returns quietly.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import threading
import time
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


class _Watch:
    """One stage under the watchdog: its cadence and where it is in it."""

    def __init__(self, ctx: StageContext, exit_when_stuck: bool) -> None:
        self.ctx = ctx
        self.exit_when_stuck = exit_when_stuck
        self.interval = float(settings.JOBS_HEARTBEAT_SECONDS)
        self.tick = min(self.interval, max(0.05, ctx.stage.deadline / 4), 1.0)
        self.due = time.monotonic() + self.tick
        self.since_beat = 0.0
        self.busy = False  # the watchdog is acting on it right now (outside the lock)
        self.done = False  # nothing more to do for it: lease lost or timed out
        self.released = threading.Event()  # the stage left run_stage (ends a stuck-exit wait)


class Watchdog(threading.Thread):
    """One thread per worker process that watches every stage running in it: renews each lease,
    learns of cancel requests and ends a stage that stopped progressing.

    A live heartbeat must not keep a hung stage alive: past the stage's no-progress deadline the
    watchdog records the timeout itself (a fenced transition, so it wins or loses cleanly against
    the handler) and raises :class:`StageTimeout` inside the handler's thread. One thread for the
    process, not one per stage: starting and joining a thread per stage cost about 1.5 ms of
    every job (issue 18). It sleeps until the earliest stage is due, so a stage shorter than its
    first tick costs a lock and a dictionary entry. ``watchdog()`` gives this process's one.
    A graceful stop (SIGTERM) needs nothing from it: ``jobs.drain`` marks the process, and the
    stage sees it at its next safe point (``StageContext.check``).
    """

    def __init__(self) -> None:
        super().__init__(name="jobs-watchdog", daemon=True)
        self.pid = os.getpid()
        self._cond = threading.Condition()
        self._watches: dict[int, _Watch] = {}
        self._wake_at = math.inf  # when the loop means to wake up next (under the lock)

    # --- what run_stage and the process call ----------------------------------------------

    def watch(self, ctx: StageContext, *, exit_when_stuck: bool = False) -> _Watch:
        watch = _Watch(ctx, exit_when_stuck)
        with self._cond:
            self._watches[id(watch)] = watch
            if watch.due < self._wake_at:
                self._cond.notify()
        return watch

    def unwatch(self, watch: _Watch) -> None:
        """Stop watching; returns once no action on this stage runs or can start (a heartbeat or
        a time-out in progress finishes first, as joining the old per-stage thread did)."""
        # The handler is out: a stuck-exit wait ends here, even if the time-out's StageTimeout
        # lands in this thread while it waits below.
        watch.released.set()
        with self._cond:
            watch.done = True
            try:
                while watch.busy:
                    self._cond.wait()
            finally:
                self._watches.pop(id(watch), None)

    # --- the thread ---------------------------------------------------------------------------

    def run(self) -> None:
        while True:
            due = self._next_due()
            try:
                for watch in due:
                    try:
                        self._act(watch)
                    except Exception:
                        log.exception("watchdog of job %s failed", watch.ctx.job_id)
                        watch.done = True
            finally:
                # A connection per round of heartbeats (one every JOBS_HEARTBEAT_SECONDS at
                # most), none held between them: an idle worker holds no extra connection, and
                # a stage that unwatch() released leaves none behind.
                with contextlib.suppress(DatabaseError):
                    connection.close()
                with self._cond:
                    for watch in due:
                        watch.busy = False
                    self._cond.notify_all()

    def _next_due(self) -> list[_Watch]:
        """Wait until a stage is due (or a new one may be); those due, marked busy."""
        with self._cond:
            while True:
                now = time.monotonic()
                live = [w for w in self._watches.values() if not w.done]
                due = [w for w in live if w.due <= now]
                if due:
                    for watch in due:
                        watch.busy = True
                    self._wake_at = now
                    return due
                self._wake_at = min((w.due for w in live), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)

    def _act(self, watch: _Watch) -> None:
        ctx = watch.ctx
        watch.due = time.monotonic() + watch.tick
        watch.since_beat += watch.tick
        if ctx.seconds_since_progress() > ctx.stage.deadline:
            watch.done = True
            self._time_out(watch)
            return
        if watch.since_beat < watch.interval:
            return
        watch.since_beat = 0.0
        try:
            answer = job_heartbeat(job_id=ctx.job_id, token=ctx.token)
        except DatabaseError:
            # A database blip: keep watching and beat again next time; the lease (three
            # beats long) rides over it, and a longer outage lets the reaper decide.
            log.warning("job %s: heartbeat failed; retrying", ctx.job_id)
            return
        if not answer.alive:
            ctx.lease_lost.set()
            watch.done = True
            return
        if answer.cancel_requested:
            ctx.cancel_requested.set()

    def _time_out(self, watch: _Watch) -> None:
        ctx = watch.ctx
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
        if watch.exit_when_stuck:
            # Waits in a thread of its own: the other stages of this process stay watched.
            threading.Thread(
                target=_exit_if_still_stuck, args=(watch,), name="jobs-stuck-exit", daemon=True
            ).start()


def _exit_if_still_stuck(watch: _Watch) -> None:
    grace = float(settings.JOBS_STUCK_EXIT_SECONDS)
    if not watch.released.wait(grace):
        # Stuck in C code (a parser hang): the process cannot be saved, so it exits and the
        # q2 cluster starts a fresh worker in its place.
        log.critical(
            "job %s: handler still stuck %ss after its deadline; worker exits", watch.ctx.job_id, grace
        )
        os._exit(70)


_process_watchdog: Watchdog | None = None
_process_watchdog_lock = threading.Lock()


def watchdog() -> Watchdog:
    """This process's watchdog, started on first use (again in a forked child: threads do not
    survive a fork, so a watchdog inherited from the parent is not this process's)."""
    global _process_watchdog
    with _process_watchdog_lock:
        current = _process_watchdog
        if current is None or current.pid != os.getpid() or not current.is_alive():
            current = Watchdog()
            current.start()
            _process_watchdog = current
        return current


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
