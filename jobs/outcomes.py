"""A stage's failure recorded by a worker that may no longer own its job: the one
fail-and-settle path of the executor and the watchdog."""

from __future__ import annotations

import logging

from jobs.errors import JobConflict
from jobs.models import Job, Status
from jobs.services.worker import Claim, job_fail_stage, job_finish_cancel

log = logging.getLogger(__name__)


def fail(claim: Claim, error: BaseException) -> None:
    """Record the stage's failure; when that compare-and-set loses, settle what is left."""
    try:
        job_fail_stage(claim=claim, error=error)
    except JobConflict:
        settle_conflict(claim)


def settle_conflict(claim: Claim) -> None:
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
