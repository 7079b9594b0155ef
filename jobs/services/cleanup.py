"""Removing a cancelled or failed run's unpublished outputs, or a replaced run's, exactly once in
effect."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from jobs import pipelines
from jobs.models import FINISHED, Job, Status

log = logging.getLogger(__name__)


def job_run_cleanup(*, job_id: Any) -> bool:
    """Run the pipeline's cleanup for a finished job that has one pending; ``True`` if it ran.

    The worker calls it right after the terminal transition commits; the reaper calls it for
    jobs whose worker died first. Cleanup hooks are idempotent, so both running it is harmless.
    """
    job = Job.objects.filter(pk=job_id).first()
    if job is None or not job.cleanup_from or job.status not in FINISHED:
        return False
    pipeline = pipelines.get(job.kind)
    if pipeline.cleanup is not None:
        try:
            pipeline.cleanup(job, job.cleanup_from)
        except Exception:
            log.exception("cleanup of job %s failed; the reaper will try again", job.pk)
            return False
    # Bookkeeping, not a status change: only clears the marker this very run answered.
    Job.objects.filter(pk=job.pk, version=job.version, cleanup_from=job.cleanup_from).update(cleanup_from="")
    return True


def job_request_cleanup(*, job_id: Any, from_stage: str) -> None:
    """Have a ready job's outputs from ``from_stage`` on removed: its subject was replaced (a
    newer version of the subject was published over it).

    Call it inside the transaction that replaces the subject: the pending marker commits with
    it, the pipeline's cleanup hook runs after the commit, and the reaper runs it if this
    process dies first. Bookkeeping, not a status change: the job stays ready.
    """
    if Job.objects.filter(pk=job_id, status=Status.READY, cleanup_from="").update(cleanup_from=from_stage):
        transaction.on_commit(lambda: job_run_cleanup(job_id=job_id))
