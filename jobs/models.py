"""Jobs, their stage runs and the append-only event log; the state graph lives here.

Every transition is a django-fsm method on :class:`Job`. Calling one only changes the instance in
memory: :func:`jobs.services.transition.apply_transition` is the one place that turns it into a
compare-and-set UPDATE on ``version`` (and the lease token where a worker acts), appends the event
and schedules side effects. Never ``save()`` a job.
"""

# long-module: the state graph, its constraints and the audit predicates belong together: the design
# keeps the graph in one place, and the indexes are defined from the same predicates.

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_fsm import FSMField, FSMModelMixin, TransitionNotAllowed, transition

from jobs import pipelines


class Status(models.TextChoices):
    UPLOADED = "uploaded"
    QUEUED = "queued"
    RUNNING = "running"
    CANCEL_REQUESTED = "cancel_requested"
    STALLED = "stalled"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"


S = Status
LEASED = (S.RUNNING, S.CANCEL_REQUESTED)
TERMINAL = (S.READY, S.CANCELLED)
FINISHED = (S.READY, S.FAILED, S.CANCELLED)
UNLEASED = (S.UPLOADED, S.QUEUED, S.READY, S.FAILED, S.CANCELLED)

# What check_jobs looks for (jobs/audit.py). Each is also the predicate of a partial index, empty
# in a healthy system, so the audit reads nothing but the offenders.
AUDIT_LEASED_WITHOUT_LEASE = Q(status__in=LEASED) & (
    Q(worker_token__isnull=True) | Q(heartbeat_at__isnull=True)
)
AUDIT_TOKEN_WITHOUT_LEASE = Q(status__in=UNLEASED) & Q(worker_token__isnull=False)
AUDIT_PROGRESS_OUT_OF_RANGE = (
    Q(progress__lt=0)
    | Q(progress__gt=100)
    | (Q(progress__gte=100) & ~Q(status=S.READY))
    | (Q(status=S.READY) & ~Q(progress=100))
)
AUDIT_WRITTEN_AFTER_FINISH = Q(
    status__in=TERMINAL, finished_at__isnull=False, updated_at__gt=models.F("finished_at")
)


# The fields each transition writes, named with the transition (``custom={"writes": ...}``):
# apply_transition writes exactly these, changed or not, so a stale copy can never leave an old
# value behind in a field the transition sets; anything else another actor changed fails the
# version check. tests/jobs/test_transitions.py checks every assignment is declared.
RELEASE = ("worker_token", "lease_expires_at")
TO_QUEUE = (*RELEASE, "queued_at", "not_before", "dispatched_at")
NEW_STAGE = (
    "stage",
    "hints",
    "checkpoint",
    "processed",
    "total",
    "skipped_stages",
    "progress",
    "error_code",
    "error_message",
)
LEASE = ("worker_token", "heartbeat_at", "lease_expires_at")
FAILED_RUN = ("error_code", "error_message", "finished_at", "checkpoint", "cleanup_from", *RELEASE)


def writes(*fields: str, lowers_progress: bool = False) -> dict[str, Any]:
    """``custom`` for a transition: the fields it writes (``progress`` only ever rises, by the
    UPDATE itself, unless the transition ``lowers_progress``: a restart from an earlier stage)."""
    return {"writes": frozenset(fields), "lowers_progress": lowers_progress}


class Actor(models.TextChoices):
    WORKER = "worker"
    USER = "user"
    OPERATOR = "operator"
    REAPER = "reaper"
    SYSTEM = "system"


# Transition conditions (django-fsm calls them with the model instance).
def _cancel_pending(job: models.Model) -> bool:
    return getattr(job, "cancel_requested_at", None) is not None


def _no_cancel_pending(job: models.Model) -> bool:
    return getattr(job, "cancel_requested_at", None) is None


def _cleaned_up(job: models.Model) -> bool:
    return not getattr(job, "cleanup_from", "")


def _due(job: models.Model) -> bool:
    not_before = getattr(job, "not_before", None)
    return not_before is None or not_before <= timezone.now()


class Job(FSMModelMixin, models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=64)
    tenant = models.CharField(max_length=64, db_index=True, help_text="Opaque tenant key.")
    subject_id = models.CharField(max_length=64)
    subject_version = models.PositiveIntegerField(default=1)
    payload = models.JSONField(default=dict, blank=True, help_text="The job's input.")

    status = FSMField(default=S.UPLOADED, choices=S.choices, protected=True)
    stage = models.CharField(max_length=32)
    version = models.PositiveBigIntegerField(default=1, help_text="Bumped by every status change.")
    attempt = models.PositiveIntegerField(default=0, help_text="Attempts of the current stage.")
    attempts_total = models.PositiveIntegerField(default=0)
    skipped_stages = models.JSONField(default=list, blank=True)
    hints = models.JSONField(default=dict, blank=True, help_text="Retry adjustments for the handler.")
    checkpoint = models.JSONField(default=dict, blank=True)
    cleanup_from = models.CharField(
        max_length=32, blank=True, default="", help_text="Outputs from this stage on await removal."
    )

    worker_token = models.CharField(max_length=64, null=True, blank=True)
    worker_name = models.CharField(max_length=128, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lost_worker = models.CharField(max_length=128, blank=True, default="")
    not_before = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)

    progress = models.FloatField(default=0.0)
    processed = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    progress_event_at = models.DateTimeField(null=True, blank=True)

    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.CharField(max_length=500, blank=True, default="")

    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    stalled_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = ["-created_at"]
        # Operator powers beyond the routine actions (see jobs/admin/actions.py).
        permissions = [
            ("takeover_job", "Can take over stalled jobs"),
            ("force_retry_job", "Can force a retry or a restart of a failed job"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject_id", "subject_version"], name="job_one_per_subject_version"
            ),
            models.CheckConstraint(
                condition=Q(progress__gte=0) & Q(progress__lte=100), name="job_progress_0_100"
            ),
            models.CheckConstraint(
                condition=Q(progress__lt=100) | Q(status=S.READY), name="job_100_only_when_ready"
            ),
            models.CheckConstraint(
                condition=~Q(status__in=LEASED)
                | (Q(worker_token__isnull=False) & Q(heartbeat_at__isnull=False)),
                name="job_leased_has_token_and_heartbeat",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=UNLEASED) | Q(worker_token__isnull=True),
                name="job_unleased_has_no_token",
            ),
            models.CheckConstraint(condition=Q(status__in=[s.value for s in S]), name="job_status_known"),
        ]
        indexes = [
            # The claim and the reaper's re-dispatch scan: due queued jobs, oldest first.
            models.Index(
                fields=["not_before", "queued_at"],
                name="job_claimable",
                condition=Q(status=S.QUEUED),
            ),
            # The reaper's stall scan: leases that may have expired.
            models.Index(
                fields=["lease_expires_at"],
                name="job_lease_expiry",
                condition=Q(status__in=LEASED),
            ),
            models.Index(fields=["stalled_at"], name="job_stalled", condition=Q(status=S.STALLED)),
            # The reaper's other scans, each matching (almost) nothing in a healthy system.
            models.Index(
                fields=["not_before", "queued_at"],
                name="job_never_dispatched",
                condition=Q(status=S.QUEUED, dispatched_at__isnull=True),
            ),
            models.Index(fields=["dispatched_at"], name="job_dispatched", condition=Q(status=S.QUEUED)),
            models.Index(fields=["finished_at"], name="job_cleanup_pending", condition=~Q(cleanup_from="")),
            # check_jobs: the violations themselves, empty unless an invariant is broken.
            models.Index(
                fields=["id"],
                name="job_audit_lease",
                condition=AUDIT_LEASED_WITHOUT_LEASE | AUDIT_TOKEN_WITHOUT_LEASE,
            ),
            models.Index(fields=["id"], name="job_audit_progress", condition=AUDIT_PROGRESS_OUT_OF_RANGE),
            models.Index(
                fields=["id"], name="job_audit_written_after_finish", condition=AUDIT_WRITTEN_AFTER_FINISH
            ),
            models.Index(fields=["tenant", "status"], name="job_tenant_status"),
            models.Index(fields=["subject_id", "subject_version"], name="job_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject_id} v{self.subject_version} ({self.status}/{self.stage})"

    # --- the state graph ----------------------------------------------------------------------
    # Each method changes the instance in memory only; apply_transition() persists it, writing
    # the fields the transition declares in ``custom`` (see ``writes``).

    @transition(field=status, source=S.UPLOADED, target=S.QUEUED, custom=writes(*TO_QUEUE))
    def enqueue(self, *, now: datetime, dispatched: bool = False) -> None:
        self._to_queue(now, now)
        if dispatched:  # its task is written in the same transaction (jobs.dispatch)
            self.dispatched_at = now

    @transition(
        field=status,
        source=S.QUEUED,
        target=S.RUNNING,
        conditions=[_due],
        custom=writes(*LEASE, "worker_name", "attempt", "attempts_total", "started_at", "lost_worker"),
    )
    def claim(self, *, now: datetime, new_token: str, worker: str, lease: float) -> None:
        self.worker_token = new_token
        self.worker_name = worker
        self.heartbeat_at = now
        self.lease_expires_at = now + timedelta(seconds=lease)
        self.attempt += 1
        self.attempts_total += 1
        self.started_at = self.started_at or now
        self.lost_worker = ""

    @transition(
        field=status, source=S.RUNNING, target=S.QUEUED, custom=writes(*NEW_STAGE, "attempt", *TO_QUEUE)
    )
    def advance(self, *, now: datetime, next_stage: str, progress: float, skipped: list[str]) -> None:
        self._enter_stage(next_stage, progress, skipped)
        self.attempt = 0
        self._to_queue(now, now)

    @transition(
        field=status,
        source=S.RUNNING,
        target=S.RUNNING,
        custom=writes(*NEW_STAGE, "attempt", "attempts_total", *LEASE),
    )
    def proceed(
        self,
        *,
        now: datetime,
        next_stage: str,
        progress: float,
        skipped: list[str],
        new_token: str,
        lease: float,
    ) -> None:
        """``advance`` and ``claim`` in one compare-and-set: the worker that finished a stage goes
        on with the next one itself (same pool), under a fresh lease token, without the job ever
        waiting in the queue."""
        self._enter_stage(next_stage, progress, skipped)
        self.attempt = 1
        self.attempts_total += 1
        self.worker_token = new_token
        self.heartbeat_at = now
        self.lease_expires_at = now + timedelta(seconds=lease)

    @transition(
        field=status,
        source=S.RUNNING,
        target=S.READY,
        custom=writes("progress", "finished_at", "error_code", "error_message", *RELEASE),
    )
    def publish(self, *, now: datetime) -> None:
        self.progress = 100.0
        self.finished_at = now
        self.error_code = ""
        self.error_message = ""
        self._release()

    @transition(
        field=status,
        source=S.RUNNING,
        target=S.QUEUED,
        custom=writes("error_code", "error_message", "hints", *TO_QUEUE),
    )
    def retry_later(
        self, *, now: datetime, not_before: datetime, code: str, message: str, hints: dict[str, Any]
    ) -> None:
        self.error_code = code
        self.error_message = message
        self.hints = {**self.hints, **hints}
        self._to_queue(now, not_before)

    @transition(field=status, source=S.RUNNING, target=S.QUEUED, custom=writes("attempt", *TO_QUEUE))
    def hand_back(self, *, now: datetime) -> None:
        """A worker that is shutting down stopped at a safe point: the job waits again at its
        checkpoint (kept: the transition does not write it). The interrupted attempt is not
        counted against the stage's retry limit: nothing failed."""
        self.attempt = max(0, self.attempt - 1)
        self._to_queue(now, now)

    @transition(field=status, source=S.RUNNING, target=S.FAILED, custom=writes(*FAILED_RUN))
    def fail(self, *, now: datetime, code: str, message: str) -> None:
        self._finish_failed(now, code, message)

    @transition(
        field=status,
        source=S.QUEUED,
        target=S.CANCELLED,
        custom=writes("cancel_requested_at", "finished_at", "not_before", "cleanup_from"),
    )
    @transition(
        field=status, source=S.RUNNING, target=S.CANCEL_REQUESTED, custom=writes("cancel_requested_at")
    )
    def cancel(self, *, now: datetime, cleanup_from: str) -> None:
        self.cancel_requested_at = now
        if self.status == S.QUEUED:
            self.finished_at = now
            self.not_before = None
            self.cleanup_from = cleanup_from

    @transition(
        field=status,
        source=S.CANCEL_REQUESTED,
        target=S.CANCELLED,
        custom=writes("finished_at", "cleanup_from", *RELEASE),
    )
    @transition(
        field=status,
        source=S.STALLED,
        target=S.CANCELLED,
        conditions=[_cancel_pending],
        custom=writes("finished_at", "cleanup_from", *RELEASE),
    )
    def finish_cancel(self, *, now: datetime, cleanup_from: str) -> None:
        self.finished_at = now
        self.cleanup_from = cleanup_from
        self._release()

    @transition(
        field=status,
        source=LEASED,
        target=S.STALLED,
        custom=writes("stalled_at", "lost_worker", "error_code", "error_message"),
    )
    def mark_stalled(self, *, now: datetime) -> None:
        if self.lease_expires_at is not None and self.lease_expires_at > now:
            raise TransitionNotAllowed("the lease has not expired", object=self, method=self.mark_stalled)
        self.stalled_at = now
        self.lost_worker = self.worker_name or self.worker_token or ""
        self.error_code = "worker_lost"
        self.error_message = ""

    @transition(
        field=status,
        source=S.STALLED,
        target=S.QUEUED,
        conditions=[_no_cancel_pending],
        custom=writes("stalled_at", "error_code", "error_message", "hints", *TO_QUEUE),
    )
    def take_over(self, *, now: datetime, hints: dict[str, Any] | None = None) -> None:
        # The lost worker's token is revoked here: its fenced writes match no row from now on.
        self._release()
        self.stalled_at = None
        self.error_code = ""
        self.error_message = ""
        self.hints = {**self.hints, **(hints or {})}
        self._to_queue(now, now)

    @transition(field=status, source=S.STALLED, target=S.FAILED, custom=writes(*FAILED_RUN))
    def give_up(self, *, now: datetime, code: str, message: str) -> None:
        self._finish_failed(now, code, message)

    @transition(
        field=status,
        source=S.FAILED,
        target=S.QUEUED,
        conditions=[_cleaned_up],
        custom=writes(
            "stage",
            "checkpoint",
            "processed",
            "total",
            "progress",
            "attempt",
            "hints",
            "error_code",
            "error_message",
            "finished_at",
            "stalled_at",
            *TO_QUEUE,
            lowers_progress=True,
        ),
    )
    def retry(
        self, *, now: datetime, stage: str, progress: float, hints: dict[str, Any] | None = None
    ) -> None:
        if stage != self.stage:
            # A restart from an earlier stage: progress honestly starts again from there.
            self.stage = stage
            self.checkpoint = {}
            self.processed = None
            self.total = None
            self.progress = progress
        self.attempt = 0
        self.hints = dict(hints or {})
        self.error_code = ""
        self.error_message = ""
        self.finished_at = None
        self.stalled_at = None
        self._to_queue(now, now)

    # --- helpers used by the transitions ------------------------------------------------------

    def _enter_stage(self, stage: str, progress: float, skipped: list[str]) -> None:
        # The finished stage's checkpoint, counts, hints and error do not carry over.
        self.stage = stage
        self.hints = {}
        self.checkpoint = {}
        self.processed = None
        self.total = None
        self.skipped_stages = skipped
        self.progress = max(self.progress, progress)
        self.error_code = ""
        self.error_message = ""

    def _release(self) -> None:
        self.worker_token = None
        self.lease_expires_at = None

    def _to_queue(self, now: datetime, not_before: datetime) -> None:
        self._release()
        self.queued_at = now
        self.not_before = not_before
        self.dispatched_at = None

    def _finish_failed(self, now: datetime, code: str, message: str) -> None:
        # The failed stage's partial outputs are removed; earlier stages' outputs stay so that a
        # retry of the failed stage can start from them. The stage itself restarts from scratch.
        self.error_code = code
        self.error_message = message
        self.finished_at = now
        self.checkpoint = {}
        self.cleanup_from = self.stage
        self._release()

    # --- read helpers -------------------------------------------------------------------------

    def state_word(self) -> str:
        """The combined word users know (a running stage, a stage's failure word, ``ready`` ...):
        the job kind's own vocabulary, registered with its pipeline."""
        return pipelines.get(self.kind).state_word(self.status, self.stage)


class StageRun(models.Model):
    """One attempt of one stage: who ran it, when, how it ended, and the operator-only detail."""

    class Outcome(models.TextChoices):
        RUNNING = "running"
        ADVANCED = "advanced"
        SKIPPED = "skipped"
        READY = "ready"
        RETRY = "retry"
        FAILED = "failed"
        CANCELLED = "cancelled"
        LOST = "lost"
        HANDED_BACK = "handed_back"  # the worker shut down and queued the job at its checkpoint

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="runs")
    stage = models.CharField(max_length=32)
    attempt = models.PositiveIntegerField()
    worker_token = models.CharField(max_length=64)
    worker_name = models.CharField(max_length=128)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.RUNNING)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_type = models.CharField(max_length=200, blank=True, default="")
    error_detail = models.TextField(blank=True, default="")
    traceback = models.TextField(blank=True, default="")
    hints = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("stage run")
        verbose_name_plural = _("stage runs")
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["job"], condition=Q(outcome="running"), name="stagerun_one_running_per_job"
            ),
        ]
        indexes = [
            models.Index(fields=["stage", "started_at"], name="stagerun_stage_started"),
            models.Index(fields=["finished_at"], name="stagerun_finished"),  # health, metrics
        ]

    @property
    def duration(self) -> timedelta | None:
        return self.finished_at - self.started_at if self.finished_at else None


class JobEvent(models.Model):
    """Append-only history of a job. The id is monotonically increasing per job in commit order
    (each event is inserted after the job row's compare-and-set, which serialises writers of one
    job), so it serves as the SSE ``id:`` and ``Last-Event-ID`` replay key."""

    class Kind(models.TextChoices):
        TRANSITION = "transition"
        PROGRESS = "progress"
        NOTE = "note"

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=32, help_text="Transition name, or 'progress'.")
    actor = models.CharField(max_length=16, choices=Actor.choices)
    actor_name = models.CharField(max_length=150, blank=True, default="")
    from_status = models.CharField(max_length=20, blank=True, default="")
    to_status = models.CharField(max_length=20, blank=True, default="")
    stage = models.CharField(max_length=32, blank=True, default="")
    attempt = models.PositiveIntegerField(default=0)
    job_version = models.PositiveBigIntegerField(default=0)
    progress = models.FloatField(null=True, blank=True)
    processed = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        verbose_name = _("job event")
        verbose_name_plural = _("job events")
        ordering = ["id"]
        indexes = [
            models.Index(fields=["job", "id"], name="jobevent_job_id"),
            models.Index(fields=["at"], name="jobevent_at"),  # health and metrics windows
            # check_jobs' terminal_changed: a ready or cancelled job that left its state.
            models.Index(
                fields=["job"],
                name="jobevent_audit_left_terminal",
                condition=Q(kind="transition", from_status__in=TERMINAL),
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise RuntimeError("job events are append-only")
        super().save(*args, **kwargs)


class AuditMark(models.Model):
    """Where an incremental audit of ``check_jobs`` stopped (the last event id it covered)."""

    name = models.CharField(max_length=64, primary_key=True)
    value = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name} @ {self.value}"


class TimingBucket(models.Model):
    """One histogram bucket: how many queue waits or stage durations of one stage fell into it in
    one hour, and their sum (``jobs.timings`` writes and reads it).

    The health page and ``/metrics`` read these rows instead of the stage runs and the event log,
    so their cost depends on stages, hours and buckets, never on how many jobs ever ran. ``hour``
    is the start of an hour (UTC), or ``jobs.timings.ALL_TIME`` for the running total that
    ``/metrics`` exposes as a Prometheus histogram. ``bucket`` indexes ``jobs.timings.BOUNDS``
    (one past the last bound is +Inf).
    """

    kind = models.CharField(max_length=64)
    stage = models.CharField(max_length=32)
    metric = models.CharField(max_length=16)  # "wait" or "duration"
    hour = models.DateTimeField()
    bucket = models.PositiveSmallIntegerField()
    count = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0, help_text="Sum of the seconds counted here.")

    class Meta:
        constraints = [
            # The upsert's conflict target; hour first so a window is one range scan of it.
            models.UniqueConstraint(
                fields=["hour", "kind", "stage", "metric", "bucket"], name="timingbucket_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.stage} {self.metric} {self.hour:%Y-%m-%d %H}h #{self.bucket}: {self.count}"


class WorkerBeat(models.Model):
    """A worker process's idle heartbeat (``jobs/workers.py``): written every
    ``JOBS_HEARTBEAT_SECONDS`` whether or not the worker holds a job, so the health page can tell
    an idle live worker from a dead one. One row per process (``host:pid``)."""

    name = models.CharField(max_length=200, primary_key=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    beat_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return self.name
