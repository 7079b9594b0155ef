"""Dispatching a job enqueues one q2 task on the caller's own database connection; a new job's
task is written in the job's own transaction (an outbox) when the broker is that database."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django_q.models import OrmQ

from jobs import quotas
from jobs.dispatch import dispatch
from jobs.models import Job
from jobs.quotas import Quota
from tests.jobs.helpers import new_job


@pytest.mark.django_db(transaction=True)
def test_a_dispatch_keeps_the_callers_connection(settings):
    if not settings.Q_CLUSTER.get("orm"):
        pytest.skip("the ORM broker is configured off")
    job = new_job()  # dispatched at its commit
    assert OrmQ.objects.count() == 1
    connection.ensure_connection()
    in_use = connection.connection
    # CONN_MAX_AGE=0, as in the web tier: q2's ORM broker closed this connection (twice) before
    # enqueueing, and the caller's next query reconnected.
    assert connection.settings_dict["CONN_MAX_AGE"] == 0
    assert dispatch(job.pk)
    assert connection.connection is in_use
    assert OrmQ.objects.count() == 2
    assert Job.objects.get(pk=job.pk).dispatched_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_new_jobs_task_is_written_and_marked_in_the_jobs_own_transaction(settings):
    """With the ORM broker the task row commits with the job, or not at all: a creation that
    rolls back leaves neither, and one that commits has its task and ``dispatched_at`` at once,
    with no after-commit step that a crash could skip."""
    if not settings.Q_CLUSTER.get("orm") or settings.Q_CLUSTER.get("sync"):
        pytest.skip("the ORM broker is configured off")

    with transaction.atomic():
        new_job()
        assert OrmQ.objects.count() == 1  # written inside the transaction, not after it
        transaction.set_rollback(True)
    assert not Job.objects.exists() and not OrmQ.objects.exists()

    with transaction.atomic():
        job = new_job()
        assert not connection.run_on_commit  # nothing left to do after the commit
    assert OrmQ.objects.count() == 1
    assert Job.objects.get(pk=job.pk).dispatched_at == job.queued_at


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_new_jobs_task_is_invisible_to_the_workers_until_the_job_commits(settings):
    if not settings.Q_CLUSTER.get("orm") or settings.Q_CLUSTER.get("sync"):
        pytest.skip("the ORM broker is configured off")
    seen: list[int] = []

    def count_tasks() -> None:
        try:
            seen.append(OrmQ.objects.count())
        finally:
            connection.close()

    def count_from_another_connection() -> int:
        thread = threading.Thread(target=count_tasks)
        thread.start()
        thread.join(10)
        return seen[-1]

    with transaction.atomic():
        new_job()
        assert count_from_another_connection() == 0
    assert count_from_another_connection() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_only_a_tenant_with_a_queue_limit_serialises_its_job_creation():
    """The queue check's advisory lock is taken for a tenant that has a limit to count against,
    and not for one without: its uploads do not wait on each other's transactions."""
    previous = quotas._provider
    quotas.register_provider(lambda tenant: Quota(max_queued=5) if tenant == "limited" else Quota())

    def advisory_locks() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            )
            return int(cursor.fetchone()[0])

    try:
        with transaction.atomic():
            new_job(tenant="open")
            assert advisory_locks() == 0
        with transaction.atomic():
            new_job(tenant="limited")
            assert advisory_locks() == 1
    finally:
        quotas.register_provider(previous)
