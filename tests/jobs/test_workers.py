"""Live workers from their idle heartbeat (jobs/workers.py): an idle worker is live, a silent
one is not, a busy one counts its jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import WorkerBeat
from jobs.services.worker import job_claim
from jobs.workers import live_workers, worker_beat
from tests.jobs.helpers import new_job

pytestmark = pytest.mark.django_db


def test_an_idle_worker_with_a_fresh_beat_is_live_with_no_job(settings):
    settings.JOBS_LEASE_SECONDS = 30
    now = timezone.now()
    worker_beat(name="host-a:1", host="host-a", pid=1, now=now - timedelta(seconds=5))
    worker_beat(name="host-old:2", host="host-old", pid=2, now=now - timedelta(seconds=45))
    workers = live_workers(now)
    assert [(w.name, w.running) for w in workers] == [("host-a:1", 0)]
    assert workers[0].last_heartbeat == now - timedelta(seconds=5)


def test_a_busy_worker_counts_its_jobs_and_one_outside_q2_is_live_by_its_jobs_lease():
    worker_beat(name="host-a:1", host="host-a", pid=1)
    job_claim(job_id=new_job().pk, worker="host-a:1")
    job_claim(job_id=new_job().pk, worker="host-a:1")
    job_claim(job_id=new_job().pk, worker="inline:7")  # e.g. ingest --inline: no idle beat
    assert {w.name: w.running for w in live_workers()} == {"host-a:1": 2, "inline:7": 1}


def test_a_beat_updates_one_row_and_prunes_rows_of_long_gone_workers():
    now = timezone.now()
    worker_beat(name="gone:1", host="gone", pid=1, now=now - timedelta(days=2))
    worker_beat(name="host-a:1", host="host-a", pid=1, now=now - timedelta(seconds=1))
    worker_beat(name="host-a:1", host="host-a", pid=1, now=now)
    assert list(WorkerBeat.objects.values_list("name", "beat_at")) == [("host-a:1", now)]
