"""Graceful drain of a q2 worker process: on SIGTERM it stops its stage at the next safe point and
hands the job back, queued at its checkpoint, instead of dying mid-stage with its lease left to
expire.

How a drain starts, in each worker process (set up by django-q2's ``post_spawn`` signal):

- SIGTERM, whether the cluster leader forwarded it (``manage.py qcluster`` got SIGTERM) or it was
  sent to the whole process group (systemd's ``KillMode=control-group``, ``kill -- -PGID``);
- the worker's parent, the q2 sentinel, died (a group SIGTERM kills it at once): the kernel's
  parent-death signal where the leader asked for it, else a guard thread polling the parent pid.

What follows: :meth:`jobs.context.StageContext.check` raises :class:`~jobs.errors.WorkerDraining`
at the handler's next safe point (between pages, batches, sandbox polls), and the executor hands
the job back (``job_hand_back``). A worker that is draining claims nothing new and, once its stage
is handed back, ends its process. A stage that reaches no safe point within
:func:`worker_deadline` is handed back by the guard thread itself (the lease token is released,
so the stuck handler's later writes are fenced out) and the process exits; the leader kills
whatever is left at ``JOBS_DRAIN_SECONDS``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connection

from jobs import proctree
from jobs.errors import JobConflict
from jobs.services.worker import Claim, job_hand_back

log = logging.getLogger(__name__)

_draining = threading.Event()
_lock = threading.Lock()
_held: dict[str, Claim] = {}  # lease token -> the stage this process is running
_working = 0  # tasks under way in this process (see working())
_installed = threading.Event()
_tick = threading.Event()  # never set: the guard's poll interval
_POLL = 0.1


def draining() -> bool:
    """True once this process was told to shut down: run nothing new, stop at a safe point."""
    return _draining.is_set()


def begin() -> None:
    """Start draining this process (also what the SIGTERM handler does)."""
    _draining.set()


def drain_seconds() -> float:
    """The bound within which a cluster's whole process tree exits after SIGTERM."""
    return settings.JOBS_DRAIN_SECONDS


def worker_deadline() -> float:
    """How long a draining worker waits for its stage to reach a safe point before handing the
    job back itself: two thirds of the bound, leaving the rest for the hand-back's commit and the
    process exits before the leader kills stragglers."""
    return max(0.5, drain_seconds() * 2 / 3)


@contextmanager
def working() -> Iterator[None]:
    """Mark this process busy with a task (claims, stages and their outcomes): the guard never
    ends a busy process before the deadline, so an outcome being recorded is not cut short."""
    global _working
    with _lock:
        _working += 1
    try:
        yield
    finally:
        with _lock:
            _working -= 1


def busy() -> bool:
    with _lock:
        return _working > 0 or bool(_held)


@contextmanager
def holding(claim: Claim) -> Iterator[None]:
    """Register ``claim`` as the stage this process runs, so the guard can hand it back."""
    with _lock:
        _held[claim.token] = claim
    try:
        yield
    finally:
        with _lock:
            _held.pop(claim.token, None)


def held() -> list[Claim]:
    with _lock:
        return list(_held.values())


def exit_if_draining() -> None:
    """Called by the q2 task when it returns: a draining worker ends its process here, before it
    reads the task queue again (so it never dies holding the queue's read lock; the sentinel
    starts a fresh worker if the cluster is not stopping)."""
    if draining():
        log.warning("worker %s drained; exiting", os.getpid())
        raise SystemExit(0)


def hand_back_held(reason: str) -> None:
    """Hand back every stage this process holds (the guard thread, past the deadline)."""
    for claim in held():
        try:
            job_hand_back(claim=claim, reason=reason)
        except JobConflict:
            log.info("job %s: already moved on when the drain handed it back", claim.job_id)
        except Exception:
            log.exception(
                "job %s: hand-back failed; the reaper recovers it when its lease expires", claim.job_id
            )
        finally:
            connection.close()


# --- in each q2 worker process -------------------------------------------------------------------


def _on_sigterm(signum: int, frame: Any) -> None:
    # Only sets a flag: a signal handler must not take locks (logging, the database).
    _draining.set()


def install_in_worker(**_signal: Any) -> None:
    """``post_spawn`` receiver (runs in the worker process's main thread): SIGTERM starts the
    drain instead of killing the process, and a guard thread bounds the drain."""
    if _installed.is_set():
        return
    _installed.set()
    signal.signal(signal.SIGTERM, _on_sigterm)
    parent = os.getppid()
    guard = threading.Thread(target=_guard, args=(parent,), name="jobs-drain-guard", daemon=True)
    guard.start()


def _orphaned(parent: int) -> bool:
    return os.getppid() != parent


def _guard(parent: int) -> None:
    # Wait for a drain; a parent that vanished (the sentinel died) starts one too.
    while not _draining.wait(0.5):
        if _orphaned(parent):
            _draining.set()
    deadline = time.monotonic() + worker_deadline()
    log.warning("worker %s draining (%d stage(s) running)", os.getpid(), len(held()))
    while True:
        if not busy() and _orphaned(parent):
            # No sentinel is left to send STOP: nothing else will end this idle process.
            _exit_with_children()
        if held() and time.monotonic() >= deadline:
            log.warning("worker %s: no safe point within %.0fs; handing back", os.getpid(), worker_deadline())
            hand_back_held("worker shutting down (no safe point reached in time)")
            _exit_with_children()
        _tick.wait(_POLL)


def _exit_with_children() -> None:
    """End this process now, and the processes it started (a stage's child would otherwise run
    on as an orphan)."""
    proctree.signal_all(proctree.descendants(os.getpid()), signal.SIGKILL)
    os._exit(0)
