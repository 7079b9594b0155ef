"""Dispatching a job enqueues one q2 task on the caller's own database connection."""

from __future__ import annotations

import pytest
from django.db import connection
from django_q.models import OrmQ

from jobs.dispatch import dispatch
from jobs.models import Job
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
