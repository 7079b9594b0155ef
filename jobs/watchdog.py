"""The watchdog: one thread per worker process that renews the leases of the stages running in
it, learns of cancel requests and ends a stage that stopped progressing (``run_stage`` watches
and unwatches each stage through ``watchdog()``)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connection

from jobs.context import StageContext
from jobs.errors import StageTimeout
from jobs.outcomes import fail
from jobs.services.worker import job_heartbeat

log = logging.getLogger(__name__)


class _Watch:
    """One stage under the watchdog: its cadence and where it is in it."""

    def __init__(self, ctx: StageContext, exit_when_stuck: bool) -> None:
        self.ctx = ctx
        self.exit_when_stuck = exit_when_stuck
        self.interval = settings.JOBS_HEARTBEAT_SECONDS
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
    process, not one per stage: starting and joining a thread per stage was a measurable share of
    every job (bench/README.md, "Speed where users feel it"). It sleeps until the earliest stage is
    due, so a stage shorter than its first tick costs a lock and a dictionary entry.
    ``watchdog()`` gives this process's one. A graceful stop (SIGTERM) needs nothing from it:
    ``jobs.drain`` marks the process, and the stage sees it at its next safe point
    (``StageContext.check``).
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
        fail(ctx.claim, error)
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
    grace = settings.JOBS_STUCK_EXIT_SECONDS
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
