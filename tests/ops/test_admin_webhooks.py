"""Operators see each webhook message with its attempts (status code, duration, error) and can
send one again; endpoints show why they were disabled and never their secret."""

from __future__ import annotations

import pytest
from django.urls import reverse

from documents.models import WebhookAttempt, WebhookMessage
from documents.services.webhooks import event_emit, webhook_endpoint_create
from documents.webhooks.delivery import deliver
from tests.documents.webhook_receiver import receiver
from tests.ops.helpers import messages_of, tenant
from tests.ops.test_admin_delete import staff

pytestmark = pytest.mark.django_db(transaction=True)


def test_attempts_are_listed_and_send_again_delivers_a_failed_message(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    settings.WEBHOOK_RETRY_SCHEDULE = []  # one attempt only
    # An operator of the platform, who looks after every workspace's webhooks.
    admin = staff(
        "oscar",
        "view_webhookmessage",
        "change_webhookmessage",
        "view_webhookattempt",
        "view_webhookendpoint",
        "view_all_documents",
    )
    with receiver([503]) as hooks:
        endpoint = webhook_endpoint_create(tenant=tenant(), url=hooks.url, events=["document.deleted"])
        [message] = event_emit(tenant=tenant(), event_type="document.deleted", data={"document_id": "x"})
        deliver(str(message.pk))
        assert WebhookMessage.objects.get().state == "failed"
        # Out of attempts: its endpoint was disabled with a notice.

        page = admin.get(reverse("admin:documents_webhookmessage_change", args=[message.pk])).content.decode()
        assert "503" in page and "HTTP 503" in page

        response = admin.post(
            reverse("admin:documents_webhookmessage_changelist"),
            {"action": "send_again", "_selected_action": [str(message.pk)]},
            follow=True,
        )
        assert messages_of(response) == ["1 message(s) will be sent again."]
        # The endpoint is disabled: the resend is refused and logged, not sent.
        deliver(str(message.pk))
        assert len(hooks.received) == 1
        assert WebhookAttempt.objects.filter(error="endpoint disabled: not sent").count() == 1

        endpoints = admin.get(reverse("admin:documents_webhookendpoint_changelist")).content.decode()
        assert (
            "Disabled: 1 attempts to deliver document.deleted" in endpoints
            and endpoint.secret not in endpoints
        )
        detail = admin.get(
            reverse("admin:documents_webhookendpoint_change", args=[endpoint.pk])
        ).content.decode()
        for shown in (endpoints, detail):  # neither the secret nor what the database keeps of it
            assert endpoint.secret not in shown and endpoint.secret_encrypted not in shown
            assert endpoint.secret_encrypted[:20] not in shown
