"""Webhooks through real processes: a q2 cluster runs the job and sends the event after the
commit, the receiver (a real HTTP server) answers 500 and then 200, and the real reaper loop hands
out the retry; both deliveries carry the same id and a valid signature (checked independently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from documents.models import WebhookAttempt, WebhookMessage
from documents.services.webhooks import webhook_endpoint_create
from jobs.models import Status
from tests.conftest import Processes, wait_for
from tests.documents import files
from tests.documents.helpers import make_tenant, upload
from tests.documents.test_ingest_cluster import wait_status
from tests.documents.webhook_receiver import receiver, signature_valid

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


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
        processes.manage("qcluster", ["qcluster"], env)
        processes.manage("reaper", ["reap_jobs", "--interval", "0.5"], env)

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
