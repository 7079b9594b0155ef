"""Which workers are alive, idle or busy: each q2 worker process writes an idle heartbeat.

A job's own heartbeat (``Job.heartbeat_at``) only says that a worker holding a job is alive; an
idle worker holds none, so the health page read "no live worker" while idle workers waited. Each
worker process therefore starts a small thread when q2 spawns it (django-q2's ``post_spawn``
signal) that upserts one :class:`~jobs.models.WorkerBeat` row every ``JOBS_HEARTBEAT_SECONDS``.
A worker is live while its row is younger than one lease period (the same rule as for a job's
lease). The row lives in the database, so the web process sees workers of every machine.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.db.models import Count, Max, Q
from django.utils import timezone

from jobs.models import LEASED, Job, WorkerBeat
from jobs.services.worker import worker_identity

log = logging.getLogger(__name__)

PRUNE_AFTER = timedelta(days=1)  # rows of processes gone this long are removed


@dataclass(frozen=True)
class LiveWorker:
    name: str
    last_heartbeat: datetime
    running: int


def _since(now: datetime) -> datetime:
    return now - timedelta(seconds=settings.JOBS_LEASE_SECONDS)


def worker_beat(*, name: str, host: str, pid: int, now: datetime | None = None) -> None:
    """Record that worker ``name`` is alive now (idle or not); prune long-gone workers' rows."""
    now = now or timezone.now()
    updated = WorkerBeat.objects.filter(name=name).update(beat_at=now)
    if not updated:
        WorkerBeat.objects.update_or_create(name=name, defaults={"host": host, "pid": pid, "beat_at": now})
        WorkerBeat.objects.filter(beat_at__lt=now - PRUNE_AFTER).delete()


def live_workers(now: datetime | None = None) -> list[LiveWorker]:
    """Workers whose idle heartbeat is younger than one lease period, each with the number of
    jobs it holds now; also any worker whose job heartbeat is that fresh (a worker started
    outside q2, e.g. ``ingest --inline``, writes no idle heartbeat)."""
    since = _since(now or timezone.now())
    held = {
        row["worker_name"]: (row["n"], row["last"])
        for row in Job.objects.filter(heartbeat_at__gte=since)
        .exclude(worker_name="")
        .values("worker_name")
        .annotate(n=Count("id", filter=Q(status__in=LEASED)), last=Max("heartbeat_at"))
        .order_by()
    }
    beats = dict(WorkerBeat.objects.filter(beat_at__gte=since).values_list("name", "beat_at"))
    workers = []
    for name in sorted(set(beats) | set(held)):
        running, job_beat = held.get(name, (0, None))
        seen = max(t for t in (beats.get(name), job_beat) if t is not None)
        workers.append(LiveWorker(name, seen, running))
    return workers


# --- the beat thread in each q2 worker process -------------------------------------------------

_started = threading.Event()


def _beat_forever(name: str, host: str, pid: int) -> None:
    interval = settings.JOBS_HEARTBEAT_SECONDS
    stop = threading.Event()  # never set: the thread ends with its process (daemon)
    while True:
        try:
            worker_beat(name=name, host=host, pid=pid)
        except Exception:  # a busy database must not kill the beat; the next one retries
            log.warning("worker heartbeat of %s not written", name, exc_info=True)
        finally:
            close_old_connections()
        if stop.wait(interval):
            return


def start_idle_heartbeat(**_signal: Any) -> None:
    """``post_spawn`` receiver: start this worker process's heartbeat thread (once)."""
    if _started.is_set():
        return
    _started.set()
    # The same identity the worker claims jobs with (its jobs' worker_name).
    name, host, pid = worker_identity(), socket.gethostname(), os.getpid()
    beat = threading.Thread(
        target=_beat_forever, args=(name, host, pid), name="jobs-worker-beat", daemon=True
    )
    beat.start()
