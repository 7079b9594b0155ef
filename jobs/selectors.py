"""Read paths: a job as users see it (API, pages, CLI all use the same view)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobs import pipelines, rules
from jobs.errors import get_cause
from jobs.models import FINISHED, LEASED, Job, JobEvent, Status
from jobs.progress import displayed
from jobs.rules import JobState


@dataclass(frozen=True)
class JobFacts:
    """A job as one event of its log recorded it: the status, stage, progress and attempt of the
    event row, and the job's facts that no event carries (its kind, cause, cleanup, pending
    cancel). The status of a past moment is rendered from this, never from a copy of the job."""

    pk: Any
    kind: str
    status: str
    stage: str
    progress: float
    processed: int | None
    total: int | None
    attempt: int
    updated_at: datetime
    finished_at: datetime | None
    heartbeat_at: datetime | None
    error_code: str
    skipped_stages: list[str]
    cleanup_from: str
    cancel_requested_at: datetime | None

    @classmethod
    def as_of(cls, job: Job, event: JobEvent) -> JobFacts:
        """``job`` as of ``event``. Where the event left the job in another status than the
        current one, the failure's cause and the finish time belong to a later moment: the
        cause is kept only for a failure, the finish time not at all."""
        same_status = event.to_status == job.status
        return cls(
            pk=job.pk,
            kind=job.kind,
            status=event.to_status,
            stage=event.stage,
            progress=event.progress or 0.0,
            processed=event.processed,
            total=event.total,
            attempt=event.attempt,
            updated_at=event.at,
            finished_at=job.finished_at if same_status else None,
            heartbeat_at=job.heartbeat_at,
            error_code=job.error_code if same_status or event.to_status == Status.FAILED else "",
            skipped_stages=job.skipped_stages,
            cleanup_from=job.cleanup_from,
            cancel_requested_at=job.cancel_requested_at,
        )

    def state_word(self) -> str:
        return pipelines.get(self.kind).state_word(self.status, self.stage)


@dataclass(frozen=True)
class StageView:
    name: str
    label: str
    state: str  # done | running | waiting | skipped | failed | cancelled


@dataclass(frozen=True)
class JobView:
    job_id: str
    status: str
    stage: str
    stage_label: str
    state: str
    stage_index: int
    stage_count: int
    progress: float | None
    processed: int | None
    total: int | None
    unit: str
    attempt: int
    can_cancel: bool
    can_retry: bool
    cancel_requested: bool
    updated_at: datetime
    finished_at: datetime | None
    error: dict[str, Any] | None
    heartbeat_at: datetime | None
    finished: bool
    stages: list[StageView] = field(default_factory=list)


def stage_states(job: JobState) -> list[StageView]:
    """The stepper: each stage of the job's pipeline as done, running, waiting, skipped, failed."""
    pipeline = pipelines.get(job.kind)
    current = pipeline.index(job.stage)
    views = []
    for i, stage in enumerate(pipeline.stages):
        if job.status == Status.READY or i < current:
            state = "skipped" if stage.name in job.skipped_stages else "done"
        elif i > current:
            state = "waiting"
        elif job.status == Status.FAILED:
            state = "failed"
        elif job.status == Status.CANCELLED:
            state = "cancelled"
        elif job.status in (Status.RUNNING, Status.CANCEL_REQUESTED):
            state = "running"
        else:
            state = "waiting"
        views.append(StageView(stage.name, stage.label or stage.name, state))
    return views


def job_view(job: JobState) -> JobView:
    """What users see of ``job`` (the job row, or :class:`JobFacts` of one of its events)."""
    pipeline = pipelines.get(job.kind)
    stage = pipeline.stage(job.stage)
    error = None
    if job.status in (Status.FAILED, Status.STALLED) and job.error_code:
        cause = get_cause(job.error_code)
        error = {
            "code": cause.code,
            "message": cause.user_message,
            "retryable": job.status == Status.FAILED and cause.user_retryable,
            "action": cause.action.value,
        }
    return JobView(
        job_id=str(job.pk),
        status=job.status,
        stage=job.stage,
        stage_label=stage.label or stage.name,
        state=job.state_word(),
        stage_index=pipeline.index(job.stage) + 1,
        stage_count=len(pipeline.stages),
        progress=displayed(
            job.progress,
            total=job.total,
            ready=job.status == Status.READY,
            stopped=job.status in (Status.FAILED, Status.CANCELLED),
        ),
        processed=job.processed,
        total=job.total,
        unit=stage.unit,
        attempt=job.attempt,
        can_cancel=rules.allowed("cancel", job),
        can_retry=rules.allowed("retry", job),
        cancel_requested=job.status == Status.CANCEL_REQUESTED,
        updated_at=job.updated_at,
        finished_at=job.finished_at,
        error=error,
        # The worker's last sign of life (every few seconds while it holds the job), for a
        # "still working" line when no unit finished lately; None when no worker holds it.
        heartbeat_at=job.heartbeat_at if job.status in LEASED else None,
        finished=job.status in FINISHED,
        stages=stage_states(job),
    )
