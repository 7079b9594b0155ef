"""The pre-built compare-and-set (jobs/services/transition_sql.py) writes exactly what plain ORM
operations write: two identical jobs go through the same transitions at the same instants, one
through :func:`apply_transition` (its pre-built statement; on PostgreSQL with the event, the
stage-run and the timing writes folded in), the other through ``update()`` with the version
compare-and-set and ``create()`` of the event, the stage run and the timing rows; after every
transition the job rows, events, stage runs and timing rows are equal but for ids."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import F, Model, Q, Value
from django.db.models.functions import Greatest
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import pipelines
from jobs.errors import JobConflict, LeaseLost
from jobs.models import LEASED, Actor, Job, JobEvent, StageRun, TimingBucket
from jobs.services.cleanup import job_run_cleanup
from jobs.services.transition import RunClose, RunStart, apply_transition
from jobs.services.transition_sql import Shape, transition_sql
from jobs.services.worker import job_report_progress
from jobs.timings import ALL_TIME, Timing, bucket_of, hour_of, timing_of_claim, timing_of_run
from tests.testapp.pipelines import KIND

pytestmark = pytest.mark.django_db

WORKER = "w1"
NOT_BEFORE = datetime(2001, 1, 1, tzinfo=UTC)  # a retry's backoff, long over


@dataclass
class Step:
    """One transition as a caller asks for it; ``close`` names the outcome of the running stage
    run it ends, ``start`` whether it starts the next one (under ``params["new_token"]``)."""

    name: str
    actor: str = Actor.WORKER
    reason: str = ""
    fenced: bool = False
    due: bool = False
    relaxed: bool = False
    close: str | None = None
    start: bool = False
    count_wait: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    after: float = 1.0  # seconds since the step before


def claim(token: str, after: float = 1.0) -> Step:
    return Step(
        "claim",
        after=after,
        reason="claimed",
        due=True,
        relaxed=True,
        start=True,
        count_wait=True,
        params={"new_token": token, "worker": WORKER, "lease": 30.0},
    )


# --- the two ways ------------------------------------------------------------------------------


def _running_run(job: Job) -> StageRun:
    return StageRun.objects.get(job_id=job.pk, outcome=StageRun.Outcome.RUNNING)


def prebuilt(job: Job, step: Step, now: datetime) -> None:
    """The transition as the engine runs it: no guard, so through the pre-built statement."""
    close = None
    if step.close is not None:
        run = _running_run(job)
        duration = timing_of_run(kind=job.kind, run=run, outcome=step.close, at=now)
        close = RunClose(pk=run.pk, outcome=step.close, at=now, duration=duration)
    apply_transition(
        job,
        step.name,
        actor=Actor(step.actor),
        actor_name=WORKER,
        reason=step.reason,
        token=job.worker_token if step.fenced else None,
        due_by=now if step.due else None,
        now=now,
        relaxed=step.relaxed,
        close_run=close,
        start_run=RunStart(step.params["new_token"], WORKER) if step.start else None,
        count_wait=step.count_wait,
        **step.params,
    )


def orm(job: Job, step: Step, now: datetime) -> bool:
    """The same transition in plain ORM operations; False when the compare-and-set matched nothing."""
    source_status, source_version = job.status, job.version
    token = job.worker_token if step.fenced else None
    method = getattr(job, step.name)
    declared = method._django_fsm.get_transition(source_status).custom
    method(now=now, **step.params)
    job.version, job.updated_at = source_version + 1, now
    written = declared["writes"] | {"status", "version", "updated_at"}
    changes: dict[str, Any] = {name: getattr(job, name) for name in written}
    if "progress" in written and not declared["lowers_progress"]:
        changes["progress"] = Greatest(F("progress"), Value(job.progress))
    rows = Job.objects.filter(pk=job.pk, version=source_version, status=source_status)
    if token is not None:
        rows = rows.filter(worker_token=token, status__in=LEASED)
    if step.due:
        rows = rows.filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
    if not rows.update(**changes):
        return False
    progress = Job.objects.values("progress", "processed", "total").get(pk=job.pk)
    JobEvent.objects.create(
        job_id=job.pk,
        at=now,
        kind=JobEvent.Kind.TRANSITION,
        name=step.name,
        actor=step.actor,
        actor_name=WORKER,
        from_status=source_status,
        to_status=job.status,
        stage=job.stage,
        attempt=job.attempt,
        job_version=job.version,
        reason=step.reason,
        **progress,
    )
    if step.close is not None:
        run = _running_run(job)
        running = StageRun.objects.filter(pk=run.pk, outcome=StageRun.Outcome.RUNNING)
        if running.update(outcome=step.close, finished_at=now):
            orm_count(timing_of_run(kind=job.kind, run=run, outcome=step.close, at=now))
    if step.start:
        assert job.heartbeat_at is not None  # the lease it starts under
        StageRun.objects.create(
            job_id=job.pk,
            stage=job.stage,
            attempt=job.attempt,
            worker_token=step.params["new_token"],
            worker_name=WORKER,
            started_at=job.heartbeat_at,
            hints=job.hints,
        )
    if step.count_wait:
        orm_count(timing_of_claim(job))
    return True


def orm_count(timing: Timing | None) -> None:
    """A timing counted in its hour's bucket and the all-time one: get-or-create, then add."""
    if timing is None:
        return
    seconds = max(0.0, timing.seconds)
    for hour in (hour_of(timing.at), ALL_TIME):
        row, _ = TimingBucket.objects.get_or_create(
            kind=timing.kind, stage=timing.stage, metric=timing.metric, hour=hour, bucket=bucket_of(seconds)
        )
        TimingBucket.objects.filter(pk=row.pk).update(count=F("count") + 1, total=F("total") + seconds)


# --- what is compared --------------------------------------------------------------------------


def _values(obj: Model, *skip: str) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if f.attname not in skip}


def written(job_id: Any) -> dict[str, Any]:
    """Everything a transition writes of one job, without the ids that tell the two jobs apart."""
    return {
        "job": _values(Job.objects.get(pk=job_id), "id", "subject_id"),
        "events": [_values(e, "id", "job_id") for e in JobEvent.objects.filter(job_id=job_id).order_by("id")],
        "runs": [_values(r, "id", "job_id") for r in StageRun.objects.filter(job_id=job_id).order_by("id")],
    }


def timing_rows() -> list[dict[str, Any]]:
    rows = TimingBucket.objects.order_by("hour", "kind", "stage", "metric", "bucket")
    return [_values(row, "id") for row in rows]


class Twins:
    """Two jobs created alike, moved through the same steps at the same instants: ``a`` by the
    pre-built statement, ``b`` by the ORM. The timing rows are shared by both (same kind and
    stage), so each side's are compared from an empty table."""

    def __init__(self) -> None:
        # In the past: a claim's condition compares ``not_before`` with the real clock.
        self.now = timezone.now().replace(microsecond=0) - timedelta(hours=1)
        self.a, self.b = (self._create() for _ in range(2))
        self.stale: tuple[Job, Job] | None = None

    def _create(self) -> Job:
        # As job_create makes it, at a chosen instant; its enqueue is the first step compared.
        stage = pipelines.get(KIND).first_stage
        subject = str(uuid.uuid4())
        return Job.objects.create(
            kind=KIND, tenant="acme", subject_id=subject, stage=stage, created_at=self.now
        )

    def copies(self) -> tuple[Job, Job]:
        return Job.objects.get(pk=self.a.pk), Job.objects.get(pk=self.b.pk)

    def step(self, step: Step) -> None:
        self.now += timedelta(seconds=step.after)
        a, b = self.stale or self.copies()
        self.stale = None
        TimingBucket.objects.all().delete()
        prebuilt(a, step, self.now)
        timings_a = timing_rows()
        TimingBucket.objects.all().delete()
        assert orm(b, step, self.now)
        assert written(self.a.pk) == written(self.b.pk), step.name
        assert timing_rows() == timings_a, step.name


def fenced(name: str, **kwargs: Any) -> Step:
    return Step(name, fenced=True, **kwargs)


def progress(done: int, total: int) -> Callable[[Twins], None]:
    """The worker reports progress (no version bump) after the next step's copies were read:
    the row's progress rises past them, and the UPDATE must keep the row's and log it."""

    def report(twins: Twins) -> None:
        twins.stale = twins.copies()
        for job in twins.copies():
            token = str(job.worker_token)
            job_report_progress(job_id=job.pk, token=token, done=done, total=total, event=False)

    return report


def cleanup(twins: Twins) -> None:
    """A failure's outputs are removed (the retry's condition)."""
    for job in (twins.a, twins.b):
        assert job_run_cleanup(job_id=job.pk)


ENQUEUE = Step("enqueue", actor=Actor.USER, reason="uploaded")
CANCEL = Step("cancel", actor=Actor.USER, params={"cleanup_from": "prepare"})
STALL = Step("mark_stalled", actor=Actor.REAPER, close=StageRun.Outcome.LOST, after=60)  # lease expired

SCENARIOS: dict[str, list[Step | Callable[[Twins], None]]] = {
    "moves-on-continues-publishes": [
        ENQUEUE,
        claim("t1", after=3),  # counts a queue wait
        progress(4, 5),  # past the next stage's start (2.0): the row's progress stays
        fenced(
            "advance",
            relaxed=True,
            close=StageRun.Outcome.ADVANCED,
            params={"next_stage": "pages", "progress": 2.0, "skipped": []},
        ),
        claim("t2", after=0.2),
        progress(3, 5),
        fenced(
            "proceed",
            relaxed=True,
            close=StageRun.Outcome.SKIPPED,  # no duration counted
            start=True,
            params={
                "next_stage": "finish",
                "progress": 90.0,
                "skipped": [],
                "new_token": "t3",
                "lease": 30.0,
            },
        ),
        fenced("publish", close=StageRun.Outcome.READY, after=120),
    ],
    "retried-later-failed-retried-cancelled": [
        ENQUEUE,
        claim("t1"),
        fenced(
            "retry_later",
            close=StageRun.Outcome.RETRY,
            params={"not_before": NOT_BEFORE, "code": "busy", "message": "Busy.", "hints": {"smaller": True}},
        ),
        claim("t2", after=40),  # a retry's backoff is no queue wait: nothing counted
        fenced("fail", close=StageRun.Outcome.FAILED, params={"code": "corrupt", "message": "Bad."}),
        cleanup,
        Step("retry", actor=Actor.USER, params={"stage": "prepare", "progress": 0.0, "hints": {}}),
        CANCEL,  # a queued job: cancelled at once
    ],
    "stalled-taken-over-handed-back-cancelled": [
        ENQUEUE,
        claim("t1"),
        STALL,
        Step("take_over", actor=Actor.OPERATOR, params={"hints": {"pages": 1}}),
        claim("t2"),
        fenced("hand_back", close=StageRun.Outcome.HANDED_BACK),
        claim("t3"),
        CANCEL,  # a running job: cancel requested
        fenced("finish_cancel", close=StageRun.Outcome.CANCELLED, params={"cleanup_from": "prepare"}),
    ],
    "cancel-requested-stalled-finished-by-the-reaper": [
        ENQUEUE,
        claim("t1"),
        CANCEL,
        STALL,
        Step("finish_cancel", actor=Actor.REAPER, params={"cleanup_from": "prepare"}),
    ],
    "stalled-given-up": [
        ENQUEUE,
        claim("t1"),
        STALL,
        Step("give_up", actor=Actor.OPERATOR, params={"code": "worker_lost", "message": "Lost."}),
    ],
}


@pytest.mark.parametrize("relaxed", [True, False], ids=["relaxed-commits", "durable-commits"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_transition_writes_the_same_rows_pre_built_and_through_the_orm(settings, scenario, relaxed):
    settings.JOBS_RELAXED_COMMIT = relaxed  # PostgreSQL folds set_config into the statement
    twins = Twins()
    for action in SCENARIOS[scenario]:
        if isinstance(action, Step):
            twins.step(action)
        else:
            action(twins)


def test_the_scenarios_run_every_transition_of_the_state_graph():
    edges = Job._meta.get_field("status").get_all_transitions(Job)
    run = {action.name for steps in SCENARIOS.values() for action in steps if isinstance(action, Step)}
    assert run == {edge.name for edge in edges}


@pytest.fixture
def twins() -> Twins:
    return Twins()


def test_a_stale_copy_or_a_lost_lease_changes_nothing_either_way(twins: Twins):
    twins.step(Step("enqueue", actor=Actor.USER))
    twins.step(claim("t1"))
    stale = twins.copies()
    twins.step(Step("cancel", actor=Actor.USER, params={"cleanup_from": "prepare"}))
    before = written(twins.a.pk), written(twins.b.pk)
    step = fenced("hand_back", close=StageRun.Outcome.HANDED_BACK)
    with pytest.raises(JobConflict):  # the version moved on
        prebuilt(stale[0], step, twins.now)
    assert not orm(stale[1], step, twins.now)
    a, b = twins.copies()
    a.worker_token = b.worker_token = "not-the-lease"
    finish = fenced("finish_cancel", close=StageRun.Outcome.CANCELLED, params={"cleanup_from": "prepare"})
    with pytest.raises(LeaseLost):  # another token holds the lease
        prebuilt(a, finish, twins.now)
    assert not orm(b, finish, twins.now)
    assert (written(twins.a.pk), written(twins.b.pk)) == before


def test_a_stage_move_is_one_statement_on_postgresql(twins: Twins):
    twins.step(Step("enqueue", actor=Actor.USER))
    twins.step(claim("t1"))
    job = twins.copies()[0]
    advance = {"next_stage": "pages", "progress": 10.0, "skipped": []}
    step = fenced("advance", relaxed=True, close=StageRun.Outcome.ADVANCED, params=advance)
    with CaptureQueriesContext(connection) as queries:
        prebuilt(job, step, twins.now + timedelta(seconds=1))
    writes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(("WITH", "UPDATE", "INSERT"))]
    # SQLite has no INSERT fed by an UPDATE: the event, the run and the timing follow it.
    assert len(writes) == (1 if connection.vendor == "postgresql" else 4)


def test_the_statement_names_the_models_columns_not_literals(monkeypatch):
    """Built from ``_meta``: a column renamed in the model is the column the SQL writes."""
    transition_sql.cache_clear()
    monkeypatch.setattr(Job._meta.get_field("worker_token"), "column", "lease_token")
    monkeypatch.setattr(StageRun._meta.get_field("outcome"), "column", "run_outcome")
    shape = Shape(("status", "version"), False, True, False, False, True, False, False, False)
    try:
        sql, _, _ = transition_sql(shape, connection.vendor)
    finally:
        transition_sql.cache_clear()
    quote = connection.ops.quote_name
    assert quote("lease_token") in sql and quote("worker_token") not in sql
    if connection.vendor == "postgresql":
        assert quote("run_outcome") in sql and quote("outcome") not in sql
