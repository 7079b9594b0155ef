"""Handing queued jobs to django-q2. Delivery only: the job table decides who runs what."""

from __future__ import annotations

import logging
from typing import Any

from django.db import router
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from jobs.broker import enqueue_broker
from jobs.models import Job, Status

log = logging.getLogger(__name__)

TASK = "jobs.tasks.run_job"
# "save": False: q2 keeps no result row for a task that returned (failures it still keeps). The
# job table and its event log are the record, and q2's bookkeeping of a success (lock and read
# its result table to prune it, then insert) costs more than a no-op stage.
TASK_OPTIONS = {"ack_failure": True, "save": False}


def with_the_job() -> bool:
    """Whether a job's task can be written in the job's own transaction (an outbox): q2's ORM
    broker on the database the job table lives in, and not q2's sync mode (which would run the
    task inside the writing transaction).

    Then the task row becomes visible at the job's commit and never before (what ``on_commit``
    gives) and can no more be lost between the two: one commit instead of three (the job, the
    task, its ``dispatched_at``). Other brokers (Redis) send the task after the commit.
    """
    return bool(Conf.ORM and not Conf.BROKER_CLASS and not Conf.SYNC and router.db_for_write(Job) == Conf.ORM)


def enqueue_task(job_id: Any) -> None:
    """Write the q2 task of ``job_id`` now, in the caller's transaction (see :func:`with_the_job`:
    the caller has set ``dispatched_at`` in the same transaction)."""
    options = {**TASK_OPTIONS, "broker": enqueue_broker()}
    async_task(TASK, str(job_id), task_name=f"job-{job_id}", q_options=options)


def dispatch(job_id: Any) -> bool:
    """Enqueue one q2 task for a queued, due job and record when. Never raises.

    A failure here loses nothing: the job stays queued with no ``dispatched_at`` and the
    reaper dispatches it on its next pass.
    """
    now = timezone.now()
    try:
        enqueue_task(job_id)
    except Exception:
        log.exception("could not hand job %s to the task queue; the reaper will retry", job_id)
        return False
    # Bookkeeping only (not a status change): it tells the reaper this job has a task in flight.
    Job.objects.filter(pk=job_id, status=Status.QUEUED).update(dispatched_at=now)
    return True


def dispatch_if_due(job: Job) -> None:
    """``after_commit`` hook of transitions into ``queued``: due jobs go out at once, the others
    (backoff) are dispatched by the reaper when their ``not_before`` passes."""
    if job.status == Status.QUEUED and (job.not_before is None or job.not_before <= timezone.now()):
        dispatch(job.pk)
