"""``check_jobs``: exits 0 on a healthy table and names the offenders of a broken invariant.

Breaking an invariant needs writes that bypass the services, which is the point: the auditor
exists to catch exactly those. Where a database constraint already forbids the state, the test
shows the database refusing it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.audit import INVARIANTS
from jobs.errors import StageFailure
from jobs.models import Actor, Job, JobEvent, StageRun
from jobs.services.lifecycle import job_retry
from jobs.services.worker import job_claim, job_complete_stage, job_fail_stage
from tests.jobs.helpers import failed, new_job, running

pytestmark = pytest.mark.django_db


def audit(capsys, *args: str) -> tuple[int, str]:
    try:
        call_command("check_jobs", *args)
    except SystemExit as exit_:
        return int(exit_.code or 0), capsys.readouterr().out
    return 0, capsys.readouterr().out


def ready_job() -> Job:
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    assert nxt is not None
    last = job_complete_stage(claim=nxt, continue_inline=True)
    assert last is not None
    job_complete_stage(claim=last)
    return Job.objects.get(pk=claim.job_id)


def test_a_healthy_table_passes(capsys):
    ready_job()
    running()
    failed()
    code, out = audit(capsys)
    assert code == 0, out
    assert "all invariants hold" in out


def test_a_ready_job_written_after_finishing_is_reported(capsys):
    job = ready_job()
    Job.objects.filter(pk=job.pk).update(updated_at=timezone.now() + timedelta(seconds=5))
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL terminal_changed" in out and str(job.pk) in out


def test_progress_going_backwards_in_the_event_log_is_reported(capsys):
    claim = running()
    JobEvent.objects.create(
        job_id=claim.job_id, kind="progress", name="progress", actor="worker", progress=50
    )
    JobEvent.objects.create(
        job_id=claim.job_id, kind="progress", name="progress", actor="worker", progress=40
    )
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL progress_backwards" in out and str(claim.job_id) in out


def test_a_restart_from_an_earlier_stage_is_not_progress_going_backwards(capsys):
    claim = running()
    nxt = job_complete_stage(claim=claim, continue_inline=True)
    job_fail_stage(claim=nxt, error=StageFailure("embedding_auth"))
    job_retry(job_id=claim.job_id, force=True, stage="prepare", actor=Actor.OPERATOR)
    again = job_claim(job_id=claim.job_id, worker="w2")
    assert again is not None
    job_complete_stage(claim=again, continue_inline=False)
    code, out = audit(capsys)
    assert code == 0, out
    assert audit(capsys, "--full")[0] == 0


@pytest.mark.parametrize(
    "change",
    [
        {"progress": 100},
        {"progress": 101},
        {"worker_token": None},
        {"heartbeat_at": None},
    ],
)
def test_the_database_refuses_states_the_invariants_forbid(change):
    claim = running()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=claim.job_id).update(**change)


def test_the_database_refuses_a_token_on_a_queued_job():
    job = new_job()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(worker_token="stolen")


def test_the_database_refuses_two_running_attempts_of_one_job():
    claim = running()
    with pytest.raises(IntegrityError), transaction.atomic():
        StageRun.objects.create(
            job_id=claim.job_id, stage="prepare", attempt=2, worker_token="x", worker_name="x"
        )


def backwards_step(job_id, minutes_ago: float) -> None:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    for progress in (50, 40):
        JobEvent.objects.create(
            job_id=job_id, at=at, kind="progress", name="progress", actor="worker", progress=progress
        )


def test_the_next_audit_reads_only_events_written_since_the_last_one(capsys):
    old = running()
    backwards_step(old.job_id, minutes_ago=5)
    code, out = audit(capsys)
    assert code == 1 and str(old.job_id) in out

    # Reported once; the next run starts after it, and still sees what is written from then on.
    code, out = audit(capsys)
    assert code == 0, out
    assert "progress checked over events after #" in out
    new = running()
    backwards_step(new.job_id, minutes_ago=2)
    code, out = audit(capsys)
    assert code == 1 and str(new.job_id) in out and str(old.job_id) not in out

    code, out = audit(capsys, "--full")
    assert code == 1 and str(new.job_id) in out and str(old.job_id) in out


def test_events_of_the_last_minute_are_read_again_by_the_next_audit(capsys):
    # An event committed late can carry an id below one already audited; the margin covers it.
    claim = running()
    backwards_step(claim.job_id, minutes_ago=0)
    assert audit(capsys)[0] == 1
    code, out = audit(capsys)
    assert code == 1 and str(claim.job_id) in out


def test_a_missing_index_that_forbids_two_running_attempts_is_reported(capsys):
    running()
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX stagerun_one_running_per_job")
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL two_running_attempts" in out and "index that forbids it is missing" in out


def test_an_index_of_that_name_that_forbids_nothing_is_reported(capsys):
    """The same name on an index that is not unique: two running attempts would be accepted."""
    with connection.cursor() as cursor:  # before any row: PostgreSQL changes no table with checks pending
        cursor.execute("DROP INDEX stagerun_one_running_per_job")
        table = connection.ops.quote_name(StageRun._meta.db_table)
        cursor.execute(f"CREATE INDEX stagerun_one_running_per_job ON {table} (job_id)")
    running()
    code, out = audit(capsys)
    assert code == 1
    assert "FAIL two_running_attempts" in out and "index that forbids it is missing" in out


def unbounded_scans(plan: dict) -> list[str]:
    """Plan nodes that read a table without an index condition or an audit partial index."""
    found = []
    if "Relation Name" in plan and plan["Node Type"] != "Bitmap Heap Scan":
        bounded = "Index Cond" in plan or "_audit_" in plan.get("Index Name", "")
        if not bounded:
            found.append(f"{plan['Node Type']} on {plan['Relation Name']} {plan.get('Index Name', '')}")
    for child in plan.get("Plans", []):
        found += unbounded_scans(child)
    return found


@pytest.mark.postgres
def test_every_audit_query_is_bounded_by_an_index():
    """On a big table the audit must not walk it. With sequential scans priced out, each query
    must read through an index condition or a partial index whose predicate is the violation; a
    query whose WHERE does not imply that predicate falls back to walking the primary key."""
    ready_job()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        with CaptureQueriesContext(connection) as captured:
            for invariant in INVARIANTS:
                invariant.find(50, False)
        checked = 0
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT") or "pg_index" in sql:
                continue
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0][0]["Plan"]
            assert unbounded_scans(plan) == [], sql
            checked += 1
    assert checked >= 6
