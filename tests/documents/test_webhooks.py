"""Webhooks: endpoints through the API (secret shown once, tenants isolated, private targets
refused), events written in the commit that makes them true, and deliveries received by a real
HTTP server whose signatures are checked by an independent implementation of the spec."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from rest_framework.test import APIClient

from documents.models import Document, Tenant, WebhookAttempt, WebhookEndpoint, WebhookMessage
from documents.services.delete import document_delete
from documents.webhooks.delivery import deliver, webhook_messages_sweep
from jobs.models import Status
from jobs.services.lifecycle import job_cancel
from tests.conftest import wait_for
from tests.documents import files
from tests.documents.helpers import run_until_idle
from tests.documents.test_delete import client_for
from tests.documents.webhook_receiver import Receiver, receiver, signature_valid

pytestmark = pytest.mark.django_db(transaction=True)

ALL = ["document.ready", "document.failed", "document.cancelled", "document.deleted"]


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    settings.WEBHOOK_TIMEOUT = 5


@pytest.fixture
def alice() -> APIClient:
    return client_for("alice", "acme")


@pytest.fixture
def mallory() -> APIClient:
    return client_for("mallory", "globex")


@pytest.fixture
def hooks() -> Iterator[Receiver]:
    with receiver() as server:
        yield server


def register(client: APIClient, url: str, events: list[str] | None = None) -> dict[str, Any]:
    response = client.post("/api/webhooks", {"url": url, "events": events or ALL}, format="json")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def upload(client: APIClient, text: str) -> dict[str, Any]:
    form = {"file": SimpleUploadedFile("doc.pdf", files.text_pdf([text]))}
    response = client.post("/api/documents/", form, format="multipart")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


def send_due() -> None:
    """What a worker does with each due message (the q2 task's own function, run here)."""
    for message in WebhookMessage.objects.filter(state="pending"):
        deliver(str(message.pk))


def test_the_secret_is_shown_once_at_creation(alice, hooks):
    created = register(alice, hooks.url, ["document.ready"])

    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"].removeprefix("whsec_"))) >= 24
    listed = alice.get("/api/webhooks").json()
    assert [e["id"] for e in listed] == [created["id"]]
    assert "secret" not in listed[0]
    one = alice.get(f"/api/webhooks/{created['id']}").json()
    assert "secret" not in one and created["secret"] not in str(one)
    assert one["events"] == ["document.ready"] and one["enabled"] is True


def test_a_ready_document_is_delivered_signed_to_a_real_server(alice, hooks):
    endpoint = register(alice, hooks.url, ["document.ready"])
    body = upload(alice, "Amber comet over the glacier.")

    assert run_until_idle(body["job_id"]).status == Status.READY
    # The job's own process sent nothing: the message waits for a worker, after the commit.
    message = WebhookMessage.objects.get()
    assert (message.event_type, message.attempts, hooks.received) == ("document.ready", 0, [])
    send_due()

    [delivery] = hooks.received
    assert signature_valid(endpoint["secret"], delivery)
    assert delivery.headers["webhook-id"] == message.webhook_id
    assert delivery.json["type"] == "document.ready"
    assert delivery.json["data"] == {
        "document_id": body["document_id"],
        "version": 1,
        "job_id": body["job_id"],
        "state": "ready",
    }
    tampered = type(delivery)(delivery.path, delivery.headers, delivery.body + b" ")
    assert not signature_valid(endpoint["secret"], tampered)
    message.refresh_from_db()
    assert (message.state, message.attempts) == ("delivered", 1)
    assert list(WebhookAttempt.objects.values_list("status_code", "error")) == [(200, "")]


def test_cancelled_failed_and_deleted_become_events_for_subscribed_endpoints_only(alice, hooks):
    register(alice, hooks.url, ["document.cancelled", "document.deleted"])
    cancelled = upload(alice, "Teal barge on the canal.")
    job_cancel(job_id=cancelled["job_id"], actor_name="alice")
    ready = upload(alice, "Ochre windmill in the fields.")
    run_until_idle(ready["job_id"])  # ready: not subscribed
    tenant = Tenant.objects.get(slug="acme")
    document_delete(tenant=tenant, document_id=ready["document_id"])

    events = sorted(WebhookMessage.objects.values_list("event_type", "payload__data__document_id"))
    assert events == sorted(
        [("document.cancelled", cancelled["document_id"]), ("document.deleted", ready["document_id"])]
    )
    send_due()
    assert sorted(d.json["type"] for d in hooks.received) == ["document.cancelled", "document.deleted"]


def test_a_failed_document_is_an_event_with_its_error(alice, hooks, settings):
    settings.DOCUMENTS_MAX_UPLOAD_BYTES = 10_000_000
    register(alice, hooks.url, ["document.failed"])
    form = {"file": SimpleUploadedFile("empty.pdf", files.zero_page_pdf())}
    body = alice.post("/api/documents/", form, format="multipart").json()
    assert run_until_idle(body["job_id"]).status == Status.FAILED

    send_due()

    [delivery] = hooks.received
    assert delivery.json["type"] == "document.failed"
    assert delivery.json["data"]["error"]["code"] and delivery.json["data"]["state"].endswith("_failed")


def test_private_targets_are_refused_without_the_setting_also_at_send_time(alice, hooks, settings):
    endpoint = register(alice, hooks.url, ["document.ready"])  # allowed while the setting is on
    settings.WEBHOOK_ALLOW_PRIVATE = False
    for url in (
        hooks.url,
        "http://localhost:9/",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://192.168.0.10/",
        "ftp://example.com/",
    ):
        response = alice.post("/api/webhooks", {"url": url, "events": ["document.ready"]}, format="json")
        assert response.status_code == 400, url
        assert response.json()["error"]["code"] in ("webhook_target_refused", "invalid"), response.content

    body = upload(alice, "Jade kite above the dunes.")
    run_until_idle(body["job_id"])
    send_due()  # the registered endpoint resolves to loopback now: refused when sending

    assert hooks.received == []
    attempt = WebhookAttempt.objects.get()
    assert attempt.status_code is None and "private" in attempt.error
    assert WebhookEndpoint.objects.get(pk=endpoint["id"]).enabled  # one refusal is a retry, not the end


def test_redirects_are_not_followed(alice):
    with receiver([302]) as hooks:
        register(alice, hooks.url, ["document.ready"])
        run_until_idle(upload(alice, "Silver fox at the gate.")["job_id"])
        send_due()
        assert [d.path for d in hooks.received] == ["/hooks"]
    attempt = WebhookAttempt.objects.get()
    assert (attempt.status_code, attempt.error) == (302, "redirects are not followed")
    assert WebhookMessage.objects.get().state == "pending"  # it will be tried again


def test_an_endpoint_that_keeps_failing_is_disabled_with_a_notice(alice, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = [0.0]  # two attempts in all
    with receiver(default=500) as hooks:
        endpoint = register(alice, hooks.url, ["document.ready"])
        run_until_idle(upload(alice, "Coral reef at low tide.")["job_id"])
        send_due()
        assert WebhookMessage.objects.get().state == "pending"
        send_due()
        assert len(hooks.received) == 2
    message = WebhookMessage.objects.get()
    assert (message.state, message.attempts) == ("failed", 2)
    shown = alice.get(f"/api/webhooks/{endpoint['id']}").json()
    assert shown["enabled"] is False and "Disabled" in shown["disabled_reason"]
    assert list(WebhookAttempt.objects.values_list("status_code", flat=True)) == [500, 500]

    # Enabled again by its owner: the notice goes.
    again = alice.patch(f"/api/webhooks/{endpoint['id']}", {"enabled": True}, format="json").json()
    assert again["enabled"] is True and again["disabled_reason"] == ""


def test_endpoints_and_events_are_isolated_between_tenants(alice, mallory, hooks):
    theirs = register(mallory, hooks.url)
    mine = register(alice, hooks.url, ["document.ready"])
    for method in ("get", "patch", "delete"):
        response = getattr(mallory, method)(f"/api/webhooks/{mine['id']}", {}, format="json")
        assert response.status_code == 404, method
    assert [e["id"] for e in mallory.get("/api/webhooks").json()] == [theirs["id"]]

    run_until_idle(upload(alice, "Indigo heron by the weir.")["job_id"])

    assert list(WebhookMessage.objects.values_list("endpoint_id", flat=True)) == [
        WebhookEndpoint.objects.get(pk=mine["id"]).pk
    ]
    assert alice.delete(f"/api/webhooks/{mine['id']}").status_code == 204
    assert not WebhookEndpoint.objects.filter(pk=mine["id"]).exists()
    assert Document.objects.count() == 1


def test_the_reapers_sweep_hands_out_due_retries(alice, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = [0.0]
    with receiver([500]) as hooks:
        register(alice, hooks.url, ["document.ready"])
        run_until_idle(upload(alice, "Scarlet tram at dusk.")["job_id"])
        send_due()  # 500: due again at once
        message = WebhookMessage.objects.get()
        assert message.state == "pending" and message.attempts == 1
        assert webhook_messages_sweep(10) == [message.pk]
        assert webhook_messages_sweep(10) == []  # handed out: not again until it is due again


def test_a_slow_endpoint_holds_at_most_the_webhook_slots_of_the_workers(alice, settings):
    settings.WEBHOOK_MAX_CONCURRENCY = 1
    with receiver() as slow, receiver() as other:
        slow.hold = threading.Event()
        register(alice, slow.url, ["document.ready"])
        run_until_idle(upload(alice, "Mauve lantern on the pier.")["job_id"])
        held = WebhookMessage.objects.get()
        sender = threading.Thread(target=lambda: (deliver(str(held.pk)), connection.close()), daemon=True)
        sender.start()
        wait_for(lambda: slow.received, timeout=10, what="the slow endpoint to be called")
        register(alice, other.url, ["document.deleted"])
        document_delete(
            tenant=Tenant.objects.get(slug="acme"), document_id=held.payload["data"]["document_id"]
        )
        waiting = WebhookMessage.objects.get(event_type="document.deleted")

        # The one slot is taken: this worker goes back to the jobs without sending.
        assert deliver(str(waiting.pk)) == "busy"
        assert other.received == []
        slow.hold.set()
        sender.join(10)
        assert deliver(str(waiting.pk)) == "delivered"
        assert len(other.received) == 1
