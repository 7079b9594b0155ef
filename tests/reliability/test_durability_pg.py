"""Durability of the worker's commits on PostgreSQL (docs/architecture.md, "The documents pipeline").

The worker commits its claims, stage moves, progress, checkpoints and output batches with
``synchronous_commit = off`` (jobs/durability.py); a publish and every terminal transition stay
durable. Two proofs: the statements of a whole job show which transactions were relaxed, and a
private server crash-stopped right after a publish comes back with the job ready.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings as DjangoSettings

from jobs.executor import run_job
from jobs.models import Job, StageRun, Status
from tests.conftest import ROOT
from tests.jobs.helpers import new_job
from tests.reliability.helpers import PrivatePostgres, manage, retrying, use_database
from tests.testapp.pipelines import NOOP_KIND

pytestmark = pytest.mark.postgres

RELAX = "synchronous_commit"  # SET LOCAL, or set_config(...) inside the statement that fences


def relaxed(transaction: list[str]) -> bool:
    return any(RELAX in statement and "SHOW" not in statement for statement in transaction)


class Transactions:
    """The statements of this connection, cut into transactions at each COMMIT; a statement
    outside a transaction block (autocommit) is a transaction of its own."""

    def __init__(self) -> None:
        self.done: list[list[str]] = []
        self.current: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if connection.in_atomic_block:
            self.current.append(sql)
        else:
            self.done.append([sql])
        return execute(sql, params, many, context)

    def commit(self) -> None:
        if self.current:
            self.done.append(self.current)
        self.current = []


@pytest.fixture
def traced() -> Iterator[Transactions]:
    trace = Transactions()
    # Django commits through the driver, not a statement: mark each commit in the trace.
    original = connection.commit

    def commit() -> None:
        original()
        trace.commit()

    connection.commit = commit  # type: ignore[method-assign]
    with connection.execute_wrapper(trace):
        yield trace
    del connection.commit


@pytest.mark.django_db(transaction=True)
def test_only_the_worker_s_repeatable_commits_are_relaxed(
    server_commit_default: None, traced: Transactions, settings: DjangoSettings
):
    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is a PostgreSQL setting")
    job = new_job(kind=NOOP_KIND)
    traced.commit()
    traced.done.clear()
    assert run_job(job.pk) == "done"
    assert Job.objects.get(pk=job.pk).status == Status.READY
    writes = ("INSERT", "UPDATE", "DELETE", "WITH")
    transactions = [t for t in traced.done if any(s.lstrip().startswith(writes) for s in t)]
    relaxed_ones = [t for t in transactions if relaxed(t)]
    durable = [t for t in transactions if not relaxed(t)]
    # The claim and the four stage moves (proceed: on PostgreSQL one statement each, with the
    # stage runs they close and start) are relaxed ...
    assert len(relaxed_ones) == 5, [t[:3] for t in transactions]
    # ... the publish is not: the last transaction, which sets the job ready, is durable.
    publish = transactions[-1]
    assert publish in durable
    assert any("UPDATE" in s and "jobs_stagerun" in s for s in publish)
    with connection.cursor() as cursor:  # SET LOCAL ended with its transaction
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"

    settings.JOBS_RELAXED_COMMIT = False
    traced.done.clear()
    other = new_job(kind=NOOP_KIND)
    assert run_job(other.pk) == "done"
    assert not [t for t in traced.done if relaxed(t)]


@pytest.mark.django_db(transaction=True)
def test_a_publish_survives_a_database_crash_right_after_it(
    private_postgres: PrivatePostgres,
    settings: DjangoSettings,
    tmp_path: Path,
    django_db_blocker: DjangoDbBlocker,
):
    # The WAL writer flushes relaxed commits only every 10 s here: a commit that did not wait for
    # its flush is lost by a crash within that window, so only a durable publish survives it.
    private_postgres.options = "-c wal_writer_delay=10000ms -c wal_writer_flush_after=0"
    private_postgres.restart()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": private_postgres.url,
        "PYTHONPATH": str(ROOT),
        "MEDIA_ROOT": str(tmp_path / "media"),
    }
    migrated = manage(env, "migrate", "--noinput", timeout=300)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    with django_db_blocker.unblock(), use_database(private_postgres.url):
        job = new_job(kind=NOOP_KIND)
        assert run_job(job.pk) == "done"
        private_postgres.restart()  # a crash stop (immediate: no checkpoint, nothing flushed)
        connection.close()
        after = retrying(lambda: Job.objects.get(pk=job.pk))
        runs = list(StageRun.objects.filter(job_id=job.pk).order_by("id").values_list("stage", "outcome"))
    assert after.status == Status.READY, after.status
    # A durable commit flushes every earlier WAL record: the relaxed stage moves are there too.
    assert runs == [
        ("s0", StageRun.Outcome.ADVANCED),
        ("s1", StageRun.Outcome.ADVANCED),
        ("s2", StageRun.Outcome.ADVANCED),
        ("s3", StageRun.Outcome.ADVANCED),
        ("s4", StageRun.Outcome.READY),
    ], runs
