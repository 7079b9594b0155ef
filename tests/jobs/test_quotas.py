"""A tenant at its running quota waits; other tenants are not held back."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs import quotas
from jobs.models import Job, Status
from jobs.quotas import Quota, register_provider
from jobs.services.worker import job_claim, job_complete_stage
from tests.jobs.helpers import new_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_running_for_acme():
    previous = quotas._provider  # the documents app registers its own; put it back afterwards
    register_provider(lambda tenant: Quota(max_running=1) if tenant == "acme" else Quota())
    yield
    register_provider(previous)


def test_a_tenant_at_its_running_quota_is_deferred_not_claimed(one_running_for_acme):
    first, second = new_job(tenant="acme"), new_job(tenant="acme")
    other = new_job(tenant="globex")
    assert job_claim(job_id=first.pk) is not None
    assert job_claim(job_id=second.pk) is None
    deferred = Job.objects.get(pk=second.pk)
    assert deferred.status == Status.QUEUED
    assert deferred.not_before > timezone.now()
    assert deferred.dispatched_at is None  # the reaper will hand it out again
    assert job_claim(job_id=other.pk) is not None  # another tenant is not held back


def test_a_freed_slot_lets_the_waiting_job_run(one_running_for_acme):
    first, second = new_job(tenant="acme"), new_job(tenant="acme")
    claim = job_claim(job_id=first.pk)
    assert claim is not None
    assert job_claim(job_id=second.pk) is None
    job_complete_stage(claim=claim)  # first goes back to the queue: the slot is free
    Job.objects.filter(pk=second.pk).update(not_before=timezone.now())
    assert job_claim(job_id=second.pk) is not None


@pytest.fixture
def two_waiting_for_acme():
    previous = quotas._provider
    register_provider(lambda tenant: Quota(max_queued=2) if tenant == "acme" else Quota())
    yield
    register_provider(previous)


def test_the_engine_refuses_a_job_past_the_queue_quota_whoever_creates_it(two_waiting_for_acme):
    """The queue quota is the engine's: any job kind, any entry point, not only uploads."""
    new_job(tenant="acme"), new_job(tenant="acme")
    with pytest.raises(quotas.QueueFull) as full:
        new_job(tenant="acme")
    assert full.value.limit == 2
    assert Job.objects.filter(tenant="acme").count() == 2  # nothing half-made
    assert new_job(tenant="globex").status == Status.QUEUED  # another tenant is not held back


def test_a_job_that_leaves_the_queue_frees_its_place(two_waiting_for_acme):
    first, _second = new_job(tenant="acme"), new_job(tenant="acme")
    assert job_claim(job_id=first.pk) is not None  # running: no longer waiting
    assert new_job(tenant="acme").status == Status.QUEUED
