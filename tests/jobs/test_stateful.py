"""Hypothesis drives the services in random order from several workers, users, operators and
the reaper (including zombies holding old leases and operators on stale pages), and checks the
invariants and the legal graph after every step."""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobs.audit import violations
from jobs.errors import JobConflict, StageFailure
from jobs.models import LEASED, UNLEASED, Actor, Job, JobEvent, StageRun, Status
from jobs.services.lifecycle import job_cancel, job_create, job_give_up, job_retry, job_take_over
from jobs.services.reaper import reap
from jobs.services.worker import (
    Claim,
    job_claim,
    job_complete_stage,
    job_fail_stage,
    job_finish_cancel,
    job_heartbeat,
    job_report_progress,
)
from tests.testapp.pipelines import KIND

LEGAL = {
    ("enqueue", "uploaded", "queued"),
    ("claim", "queued", "running"),
    ("advance", "running", "queued"),
    ("proceed", "running", "running"),
    ("publish", "running", "ready"),
    ("retry_later", "running", "queued"),
    ("fail", "running", "failed"),
    ("cancel", "queued", "cancelled"),
    ("cancel", "running", "cancel_requested"),
    ("finish_cancel", "cancel_requested", "cancelled"),
    ("finish_cancel", "stalled", "cancelled"),
    ("mark_stalled", "running", "stalled"),
    ("mark_stalled", "cancel_requested", "stalled"),
    ("take_over", "stalled", "queued"),
    ("give_up", "stalled", "failed"),
    ("retry", "failed", "queued"),
}
CAUSES = ["internal_error", "corrupt_input", "embedding_rate_limited", "embedding_auth", "index_write_failed"]


class JobMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.jobs: list[uuid.UUID] = []
        self.claims: list[Claim] = []  # every claim ever taken: current ones and zombies
        self.seen: dict[uuid.UUID, int] = {}  # versions an operator page showed, maybe stale
        self.finished_terminal: dict[uuid.UUID, str] = {}

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.atomic.__exit__(None, None, None)

    def _claim(self, c: int, zombie: bool) -> Claim | None:
        """The latest claim of a job (its live worker, usually) or, for a zombie, an older one."""
        if not self.claims:
            return None
        job_id = self.jobs[c % len(self.jobs)]
        mine = [claim for claim in self.claims if claim.job_id == job_id]
        if not mine:
            return None
        return mine[0] if zombie else mine[-1]

    def _job(self, i: int) -> Job | None:
        return Job.objects.filter(pk=self.jobs[i % len(self.jobs)]).first() if self.jobs else None

    @precondition(lambda self: len(self.jobs) < 4)
    @rule()
    def create(self) -> None:
        job = job_create(kind=KIND, tenant="t", subject_id=str(uuid.uuid4()), payload={})
        self.jobs.append(job.pk)

    @rule(i=st.integers(0, 50), worker=st.sampled_from(["w1", "w2", "w3"]))
    def claim(self, i: int, worker: str) -> None:
        job = self._job(i)
        if job is not None:
            claim = job_claim(job_id=job.pk, worker=worker)
            if claim is not None:
                self.claims.append(claim)

    @rule(c=st.integers(0, 100), zombie=st.booleans(), inline=st.booleans())
    def complete(self, c: int, zombie: bool, inline: bool) -> None:
        claim = self._claim(c, zombie)
        if claim is not None:
            try:
                nxt = job_complete_stage(claim=claim, continue_inline=inline)
            except JobConflict:
                return
            if nxt is not None:
                self.claims.append(nxt)

    @rule(c=st.integers(0, 100), zombie=st.booleans(), cause=st.sampled_from(CAUSES))
    def fail(self, c: int, zombie: bool, cause: str) -> None:
        claim = self._claim(c, zombie)
        if claim is not None:
            with contextlib.suppress(JobConflict):
                job_fail_stage(claim=claim, error=StageFailure(cause), rng=random.Random(0))

    @rule(c=st.integers(0, 100), zombie=st.booleans(), done=st.integers(0, 10))
    def progress_or_heartbeat(self, c: int, zombie: bool, done: int) -> None:
        claim = self._claim(c, zombie)
        if claim is not None:
            job_heartbeat(job_id=claim.job_id, token=claim.token)
            with contextlib.suppress(JobConflict):
                job_report_progress(job_id=claim.job_id, token=claim.token, done=done, total=10)

    @rule(c=st.integers(0, 100), zombie=st.booleans())
    def worker_finishes_cancel(self, c: int, zombie: bool) -> None:
        claim = self._claim(c, zombie)
        if claim is not None:
            with contextlib.suppress(JobConflict):
                job_finish_cancel(claim=claim)

    @rule(i=st.integers(0, 50))
    def user_cancels(self, i: int) -> None:
        job = self._job(i)
        if job is not None:
            with contextlib.suppress(JobConflict):
                job_cancel(job_id=job.pk)

    @rule(i=st.integers(0, 50))
    def operator_looks(self, i: int) -> None:
        job = self._job(i)
        if job is not None:
            self.seen[job.pk] = job.version

    @rule(i=st.integers(0, 50), action=st.sampled_from(["take_over", "give_up", "retry", "restart"]))
    def operator_acts(self, i: int, action: str) -> None:
        job = self._job(i)
        if job is None or job.pk not in self.seen:
            return
        version = self.seen[job.pk]
        try:
            if action == "take_over":
                job_take_over(job_id=job.pk, expected_version=version, actor_name="op")
            elif action == "give_up":
                job_give_up(job_id=job.pk, expected_version=version, actor_name="op")
            else:
                stage = "prepare" if action == "restart" else None
                job_retry(
                    job_id=job.pk, expected_version=version, force=True, stage=stage, actor=Actor.OPERATOR
                )
        except JobConflict:
            current = Job.objects.get(pk=job.pk)
            # A refusal must leave the job as it was; a stale page must be refused.
            assert current.version >= version

    @rule(minutes=st.sampled_from([0, 10]))
    def reaper(self, minutes: int) -> None:
        reap(now=timezone.now() + timedelta(minutes=minutes))

    @invariant()
    def invariants_hold(self) -> None:
        assert violations() == {}
        for name, src, dst in JobEvent.objects.filter(kind="transition").values_list(
            "name", "from_status", "to_status"
        ):
            assert (name, src, dst) in LEGAL, (name, src, dst)
        for job in Job.objects.all():
            if job.status in LEASED:
                assert job.worker_token and job.heartbeat_at
                assert (
                    StageRun.objects.filter(job=job, outcome="running", worker_token=job.worker_token).count()
                    == 1
                )
            if job.status in UNLEASED:
                assert job.worker_token is None
                assert not StageRun.objects.filter(job=job, outcome="running").exists()
            if job.status in (Status.READY, Status.CANCELLED):
                previous = self.finished_terminal.setdefault(job.pk, job.status)
                assert previous == job.status
            last = JobEvent.objects.filter(job=job, kind="transition").last()
            assert last is not None and last.to_status == job.status and last.job_version == job.version


@pytest.mark.django_db
def test_random_interleavings_keep_every_invariant():
    run_state_machine_as_test(
        JobMachine,
        settings=settings(
            # ``make test-fast`` runs a few examples; the full suite the whole 40.
            max_examples=int(os.environ.get("STATEFUL_EXAMPLES", "40")),
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
