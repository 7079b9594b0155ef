"""Webhook signing secrets are stored encrypted with a key derived from SECRET_KEY: the column
holds no plaintext, deliveries to a real HTTP server still verify with the standardwebhooks
library, a rotated key keeps them working through SECRET_KEY_FALLBACKS until ``encrypt_secrets``
writes them again, an unreadable secret is a recorded attempt error that names no value, and the
migration encrypts existing rows and decrypts them back."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from rest_framework.test import APIClient
from standardwebhooks import Webhook

from documents import credentials
from documents.models import WebhookAttempt, WebhookEndpoint, WebhookMessage
from jobs.models import Status
from tests.documents.helpers import run_until_idle
from tests.documents.test_v1_files_migration import migrate
from tests.documents.test_webhooks import alice, engine_settings, hooks, register, send_due, upload
from tests.documents.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["alice", "engine_settings", "hooks"]  # the webhook tests' fixtures, imported for pytest

OLD_KEY = "tests-old-key-0123456789-abcdefghijklmnopqrstuvwxyz-rotated-out"
NEW_KEY = "tests-new-key-0123456789-abcdefghijklmnopqrstuvwxyz-rotated-in!"


def _column(endpoint_id: str) -> str:
    table = WebhookEndpoint._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT secret_encrypted FROM {table} WHERE id = %s", [endpoint_id.replace("-", "")])
        row = cursor.fetchone() or ()
    if not row:  # PostgreSQL stores the uuid as a uuid
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT secret_encrypted FROM {table} WHERE id = %s", [endpoint_id])
            row = cursor.fetchone()
    return str(row[0])


def _verified(secret: str, hooks: Receiver) -> list[dict[str, Any]]:
    """Every delivery, verified with the standardwebhooks library (raises on a bad signature)."""
    return [Webhook(secret).verify(d.body, dict(d.headers)) for d in hooks.received]


def _ready_event(alice: APIClient, text: str) -> None:
    body = upload(alice, text)
    assert run_until_idle(body["job_id"]).status == Status.READY
    send_due()


def test_the_column_holds_the_secret_only_encrypted(alice: APIClient, hooks: Receiver) -> None:
    created = register(alice, hooks.url, ["document.ready"])
    secret = created["secret"]

    stored = _column(created["id"])

    assert stored.startswith(credentials.PREFIX)
    assert secret not in stored and secret.removeprefix("whsec_") not in stored
    assert WebhookEndpoint.objects.get(pk=created["id"]).secret == secret


def test_deliveries_are_signed_with_the_decrypted_secret(alice: APIClient, hooks: Receiver) -> None:
    created = register(alice, hooks.url, ["document.ready"])

    _ready_event(alice, "Amber comet over the glacier.")

    [payload] = _verified(created["secret"], hooks)
    assert payload["type"] == "document.ready"


def test_a_rotated_key_still_signs_through_the_fallbacks_until_encrypt_secrets_rewrites_them(
    alice: APIClient, hooks: Receiver, settings: Any
) -> None:
    settings.SECRET_KEY = OLD_KEY
    created = register(alice, hooks.url, ["document.ready"])
    before = _column(created["id"])
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_KEY, [OLD_KEY]

    _ready_event(alice, "Amber comet over the glacier.")
    out = io.StringIO()
    call_command("encrypt_secrets", stdout=out)
    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone now
    _ready_event(alice, "Cobalt tram climbs the northern hill.")

    assert len(_verified(created["secret"], hooks)) == 2
    assert "1 encrypted with the current key, 0 unreadable" in out.getvalue()
    assert _column(created["id"]) != before


def test_without_the_old_key_nothing_is_sent_and_the_attempt_says_why_without_the_secret(
    alice: APIClient, hooks: Receiver, settings: Any
) -> None:
    settings.SECRET_KEY = OLD_KEY
    created = register(alice, hooks.url, ["document.ready"])
    settings.SECRET_KEY = NEW_KEY  # rotated without a fallback

    _ready_event(alice, "Amber comet over the glacier.")

    assert hooks.received == []
    [error] = WebhookAttempt.objects.values_list("error", flat=True)
    assert "cannot be decrypted" in error
    stored = _column(created["id"])
    assert created["secret"] not in error and stored not in error
    assert WebhookMessage.objects.get().state == WebhookMessage.State.PENDING  # retried later
    with pytest.raises(CommandError, match="open with none of") as refused:
        call_command("encrypt_secrets", stdout=io.StringIO())
    assert created["secret"] not in str(refused.value) and stored not in str(refused.value)


def test_a_tampered_or_plain_value_is_refused() -> None:
    token = credentials.encrypt("whsec_abc")
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")

    for value in (tampered, "whsec_abc", ""):
        with pytest.raises(credentials.SecretUnreadable) as refused:
            credentials.decrypt(value)
        assert "whsec_abc" not in str(refused.value) and token not in str(refused.value)
    assert credentials.decrypt(token) == "whsec_abc"


def test_the_migration_encrypts_existing_secrets_and_backwards_decrypts_them() -> None:
    try:
        old = migrate([("documents", "0013_tenant_full_text")])
        tenant = old.get_model("documents", "Tenant").objects.create(slug="acme", name="Acme")
        Endpoint = old.get_model("documents", "WebhookEndpoint")
        endpoint = Endpoint.objects.create(
            tenant=tenant, url="https://example.com/hook", secret="whsec_plain"
        )

        new = migrate([("documents", "0015_webhook_secret_encrypted")])
        stored = new.get_model("documents", "WebhookEndpoint").objects.get(pk=endpoint.pk).secret_encrypted
        assert stored.startswith(credentials.PREFIX) and "whsec_plain" not in stored
        assert credentials.decrypt(stored) == "whsec_plain"

        back = migrate([("documents", "0013_tenant_full_text")])
        assert (
            back.get_model("documents", "WebhookEndpoint").objects.get(pk=endpoint.pk).secret == "whsec_plain"
        )
    finally:  # back to the latest schema, whatever failed: the rest of the suite needs it
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
