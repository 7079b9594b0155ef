"""Creating jobs in a given state through the services (never by raw inserts)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.utils import timezone

from jobs.errors import StageFailure
from jobs.models import Job
from jobs.services.lifecycle import job_cancel, job_create
from jobs.services.reaper import reap
from jobs.services.worker import Claim, job_claim, job_fail_stage
from tests.testapp.pipelines import KIND


def new_job(kind: str = KIND, tenant: str = "acme", **payload: Any) -> Job:
    return job_create(kind=kind, tenant=tenant, subject_id=str(uuid.uuid4()), payload=payload)


def running(worker: str = "w1", **payload: Any) -> Claim:
    job = new_job(**payload)
    claim = job_claim(job_id=job.pk, worker=worker)
    assert claim is not None
    return claim


def reload(job_or_claim: Job | Claim) -> Job:
    pk = job_or_claim.job_id if isinstance(job_or_claim, Claim) else job_or_claim.pk
    return Job.objects.get(pk=pk)


def cancel_requested() -> Claim:
    claim = running()
    job_cancel(job_id=claim.job_id)
    return claim


def stalled(**payload: Any) -> Claim:
    """A running job whose worker vanished: its lease expired and the reaper stalled it."""
    claim = running(**payload)
    later = timezone.now() + timedelta(hours=1)
    reap(now=later)
    return claim


def failed(code: str = "corrupt_input") -> Job:
    claim = running()
    try:
        raise StageFailure(code, "operator detail")
    except StageFailure as error:
        return job_fail_stage(claim=claim, error=error)
