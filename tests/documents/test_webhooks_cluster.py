"""Webhooks through real processes: a q2 cluster runs the job and writes the event in the commit,
the delivery cluster sends it, the receiver (a real HTTP server) answers 500 and then 200, and the
real reaper loop hands out the retry; both deliveries carry the same id and a valid signature
(checked independently). An endpoint that trickles its answer costs the jobs' workers nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from documents.models import WebhookAttempt, WebhookMessage
from documents.services.webhooks import webhook_endpoint_create
from jobs.models import Status
from tests.conftest import Processes, wait_for
from tests.documents import files
from tests.documents.helpers import make_tenant, upload
from tests.documents.test_ingest_cluster import wait_status
from tests.documents.webhook_receiver import receiver, signature_valid, trickler

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def start_platform(processes: Processes, env: dict[str, str]) -> None:
    """The jobs' cluster, the delivery cluster and the reaper, as ``run_platform`` starts them."""
    processes.manage("qcluster", ["qcluster"], env)
    webhook_env = {**env, "Q_CLUSTER_NAME": django_settings.WEBHOOK_QUEUE}
    processes.manage("webhook workers", ["qcluster"], webhook_env)
    processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)


def test_a_delivery_answered_500_is_retried_by_the_workers_until_200(
    processes: Processes, subprocess_env: dict[str, str], settings, tmp_path: Path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True
    env = {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "WEBHOOK_ALLOW_PRIVATE": "1",
        "WEBHOOK_RETRY_SCHEDULE": "0.5,0.5",
    }
    tenant = make_tenant("acme")
    with receiver([500]) as hooks:
        endpoint = webhook_endpoint_create(tenant=tenant, url=hooks.url, events=["document.ready"])
        start_platform(processes, env)

        result = upload(tenant, files.text_pdf(["Umber owl in the belfry."]), "owl.pdf")
        assert result.job is not None
        wait_status(result.job, Status.READY, processes)
        wait_for(
            lambda: WebhookMessage.objects.filter(state="delivered").exists(),
            timeout=60,
            what=f"the delivery\n{processes.logs()}",
        )

        first, second = hooks.received
    message = WebhookMessage.objects.get()
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == message.webhook_id
    assert signature_valid(endpoint.secret, first) and signature_valid(endpoint.secret, second)
    assert second.json["data"]["document_id"] == str(result.document.pk)
    attempts = list(WebhookAttempt.objects.filter(message=message).order_by("at"))
    assert [(a.status_code, a.error) for a in attempts] == [(500, "HTTP 500"), (200, "")]
    assert message.attempts == 2


def test_an_endpoint_trickling_its_answers_leaves_the_jobs_workers_to_other_tenants(
    processes: Processes, subprocess_env: dict[str, str], settings, tmp_path: Path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True
    env = {
        **subprocess_env,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "WEBHOOK_ALLOW_PRIVATE": "1",
        "WEBHOOK_TIMEOUT": "3",
        "WEBHOOK_MAX_CONCURRENCY": "2",
        "WEBHOOK_RETRY_SCHEDULE": "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5",
        "Q_WORKERS": "2",
    }
    acme, globex = make_tenant("acme"), make_tenant("globex")
    with trickler(every=1.0) as slow:
        webhook_endpoint_create(tenant=acme, url=slow.url, events=["document.ready"])
        start_platform(processes, env)
        first = upload(acme, files.text_pdf(["Teal kettle on the stove."]), "kettle.pdf")
        second = upload(acme, files.text_pdf(["Amber comet over the bay."]), "comet.pdf")
        for result in (first, second):
            assert result.job is not None
            wait_status(result.job, Status.READY, processes)
        # Both messages are being trickled to, as many at once as deliveries may send.
        wait_for(lambda: slow.connections >= 2, timeout=60, what=f"two deliveries\n{processes.logs()}")

        other = upload(globex, files.text_pdf(["Saffron ferry at the quay."]), "ferry.pdf")
        assert other.job is not None
        wait_status(other.job, Status.READY, processes)  # liveness bound: 60 s
        wait_for(
            lambda: WebhookAttempt.objects.filter(error="timed out after 3 s").count() >= 2,
            timeout=60,
            what=f"the attempts to end at their deadline\n{processes.logs()}",
        )
    attempts = WebhookAttempt.objects.filter(error="timed out after 3 s")
    # Each attempt ended at its deadline (wide margin: a loaded machine), not when the endpoint
    # stopped trickling.
    assert all(a.status_code is None and a.duration_ms < 20_000 for a in attempts)
    assert not WebhookMessage.objects.filter(state="delivered").exists()
