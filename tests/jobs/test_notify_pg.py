"""On PostgreSQL every event reaches the SSE listeners through a trigger: one notification per
event, at commit, with ``job id:event id`` on the channel they listen to, and none for an event
whose transaction rolled back."""

from __future__ import annotations

import psycopg
import pytest
from django.db import transaction

from jobs.models import JobEvent
from jobs.services.transition import NOTIFY_CHANNEL
from jobs.services.worker import job_heartbeat, job_report_progress
from tests.conftest import database_url
from tests.jobs.helpers import running

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def received(conn: psycopg.Connection) -> list[str]:
    return [note.payload for note in conn.notifies(timeout=1.0, stop_after=50)]


def test_each_committed_event_is_notified_with_its_job_and_id(settings):
    settings.JOBS_PROGRESS_EVENT_SECONDS = 0  # every report writes an event
    with psycopg.connect(database_url(), autocommit=True) as listener:
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        claim = running()
        job_report_progress(job_id=claim.job_id, token=claim.token, done=1, total=2)
        ids = list(JobEvent.objects.filter(job_id=claim.job_id).order_by("id").values_list("id", flat=True))
        assert received(listener) == [f"{claim.job_id}:{event_id}" for event_id in ids]

        transaction.set_autocommit(False)
        try:
            job_report_progress(job_id=claim.job_id, token=claim.token, done=2, total=2)
            assert JobEvent.objects.filter(job_id=claim.job_id).count() == len(ids) + 1
            transaction.rollback()
        finally:
            transaction.set_autocommit(True)
        assert job_heartbeat(job_id=claim.job_id, token=claim.token).alive
        assert received(listener) == []
