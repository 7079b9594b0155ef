"""Webhooks and access lists: an endpoint belongs to the member who registered it and its outbox
gets only the events about documents that member may see when the event is written (a batch's
counts as they see them); an endpoint without an owner is workspace-wide; only the owner or a
workspace admin changes an endpoint. Deliveries go to a real HTTP receiver."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from documents.models import Tenant, WebhookEndpoint, WebhookMessage
from documents.selectors import viewer_for
from documents.services.access import document_access_set
from documents.services.delete import document_delete
from documents.services.groups import membership_set_admin
from documents.services.webhooks import webhook_endpoint_create
from jobs.models import Status
from tests.documents import files
from tests.documents.helpers import run_until_idle
from tests.documents.test_delete import client_for
from tests.documents.test_webhooks import register, send_due
from tests.documents.webhook_receiver import Receiver, receiver

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = ["document.ready", "document.deleted", "batch.completed"]


@pytest.fixture(autouse=True)
def engine_settings(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receivers listen on 127.0.0.1
    settings.WEBHOOK_TIMEOUT = 5


@pytest.fixture
def alice() -> APIClient:
    return client_for("alice", "acme")


@pytest.fixture
def bob() -> APIClient:
    return client_for("bob", "acme")


@pytest.fixture
def hooks() -> Iterator[tuple[Receiver, Receiver]]:
    with receiver() as alices, receiver() as bobs:
        yield alices, bobs


def user(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def acme() -> Tenant:
    return Tenant.objects.get(slug="acme")


def ready(client: APIClient, text: str, access: str | None = None) -> str:
    form: dict[str, Any] = {"file": SimpleUploadedFile("doc.pdf", files.text_pdf([text]))}
    if access is not None:
        form["access"] = access
    answer = client.post("/api/documents/", form, format="multipart")
    assert answer.status_code == 201, answer.content
    assert run_until_idle(answer.json()["job_id"]).status == Status.READY
    return str(answer.json()["document_id"])


def restrict(document_id: str, *usernames: str) -> None:
    """The document's own list: exactly these members (set by alice, its creator)."""
    document_access_set(
        viewer=viewer_for(user("alice"), acme()),
        document=acme().documents.get(pk=document_id),
        inherit=False,
        principals=[f"user:{user(name).pk}" for name in usernames],
        user=user("alice"),
    )


def told(endpoint_id: str) -> list[tuple[str, Any]]:
    """What the endpoint's outbox holds: (event, document id) in the order written."""
    rows = WebhookMessage.objects.filter(endpoint_id=uuid.UUID(endpoint_id))
    rows = rows.order_by("created_at", "event_type")
    return [(m.event_type, m.payload["data"].get("document_id")) for m in rows]


def delivered(server: Receiver) -> list[tuple[str, Any]]:
    return [(d.json["type"], d.json["data"].get("document_id")) for d in server.received]


def test_an_endpoint_is_told_only_about_documents_its_owner_may_see(alice, bob, hooks):
    alices_server, bobs_server = hooks
    mine = register(alice, alices_server.url, EVENTS)["id"]
    theirs = register(bob, bobs_server.url, EVENTS)["id"]

    public = ready(alice, "Amber comet over the glacier.")
    secret = ready(alice, "Salaries by the tide.", access=f"user:{user('alice').pk}")

    assert told(mine) == [("document.ready", public), ("document.ready", secret)]
    assert told(theirs) == [("document.ready", public)]  # the filter is in the outbox, not at sending
    send_due()
    assert sorted(delivered(alices_server)) == sorted(told(mine))
    assert delivered(bobs_server) == [("document.ready", public)]

    # Judged when the event is written: bob may see the secret once it is opened to him, so its
    # delete reaches him; the public one, restricted to alice first, is deleted without telling him.
    restrict(secret, "alice", "bob")
    restrict(public, "alice")
    document_delete(tenant=acme(), document_id=secret)
    document_delete(tenant=acme(), document_id=public)
    assert sorted(told(theirs)) == sorted([("document.ready", public), ("document.deleted", secret)])
    assert ("document.deleted", public) in told(mine) and ("document.deleted", secret) in told(mine)
    send_due()
    assert sorted(delivered(bobs_server)) == sorted(told(theirs))


def test_a_batch_event_counts_only_what_the_owner_may_see(alice, bob, hooks):
    alices_server, bobs_server = hooks
    mine = register(alice, alices_server.url, ["batch.completed"])["id"]
    theirs = register(bob, bobs_server.url, ["batch.completed"])["id"]
    form = {
        "files": [
            SimpleUploadedFile("a.pdf", files.text_pdf(["Lilac gate."])),
            SimpleUploadedFile("b.pdf", files.text_pdf(["Rust anchor."])),
        ],
        "access": f"user:{user('alice').pk}",
    }
    batch = alice.post("/api/batches", form, format="multipart").json()
    public = ready(alice, "Open notes.")  # not in the batch
    for item in batch["documents"]:
        run_until_idle(item["job_id"])

    [for_alice] = WebhookMessage.objects.filter(endpoint_id=mine)
    [for_bob] = WebhookMessage.objects.filter(endpoint_id=theirs, event_type="batch.completed")
    assert for_alice.payload["data"]["file_counts"]["ready"] == 2
    assert for_bob.payload["data"] == {
        "batch_id": batch["batch_id"],
        "file_counts": {
            "queued": 0,
            "in_progress": 0,
            "ready": 0,
            "failed": 0,
            "cancelled": 0,
            "total": 0,
            "rejected": 0,
        },
    }
    send_due()
    [delivery] = bobs_server.received
    assert delivery.json["data"]["file_counts"]["total"] == 0
    assert batch["documents"][0]["document_id"] not in delivery.body.decode()
    assert public  # bob's endpoint is subscribed to batches only: nothing else came


def test_an_endpoint_without_an_owner_is_workspace_wide_and_a_departed_owner_is_told_nothing(alice, bob):
    with receiver() as platform_server, receiver() as bobs_server:
        platform = webhook_endpoint_create(tenant=acme(), url=platform_server.url, events=["document.ready"])
        theirs = register(bob, bobs_server.url, ["document.ready"])["id"]
        secret = ready(alice, "Salaries by the tide.", access=f"user:{user('alice').pk}")
        assert told(str(platform.pk)) == [("document.ready", secret)]

        get_user_model().objects.filter(username="bob").update(is_active=False)
        public = ready(alice, "Open notes.")
        assert told(str(platform.pk)) == [("document.ready", secret), ("document.ready", public)]
        assert told(theirs) == []
        send_due()
        assert len(platform_server.received) == 2 and bobs_server.received == []

    user("bob").delete()  # an endpoint never outlives its owner (it would become workspace-wide)
    assert not WebhookEndpoint.objects.filter(pk=theirs).exists()


def test_only_the_owner_or_a_workspace_admin_changes_an_endpoint(alice, bob, hooks):
    alices_server, bobs_server = hooks
    mine = register(alice, alices_server.url, ["document.ready"])["id"]

    for method, body in (("patch", {"url": bobs_server.url}), ("delete", None)):
        refused = getattr(bob, method)(f"/api/webhooks/{mine}", body, format="json")
        assert refused.status_code == 403, refused.content
        assert refused.json()["error"]["code"] == "not_allowed"
    assert WebhookEndpoint.objects.get(pk=mine).url == alices_server.url
    assert bob.get(f"/api/webhooks/{mine}").status_code == 200  # listing stays open to members

    membership_set_admin(membership=user("bob").memberships.get(), is_admin=True)
    assert bob.patch(f"/api/webhooks/{mine}", {"enabled": False}, format="json").status_code == 200
    assert alice.delete(f"/api/webhooks/{mine}").status_code == 204
