"""Webhook endpoints (a tenant registers, changes and removes them) and events.

An event is written as one :class:`WebhookMessage` per subscribed endpoint inside the commit that
makes it true (the job's terminal transition, the delete), so it is never lost nor told early;
the workers send it after that commit (``documents.webhooks.delivery``).

An endpoint belongs to the user who registered it (``created_by``) and is told only what that
user may see when the event is written (docs/permissions.md): an event about a document goes
to the endpoints whose owner may see that document, and an event whose content depends on the
reader (a batch's counts) is written for each owner as they see it. An owner who is no longer
an active member of the workspace is told nothing. An endpoint without an owner (made by the
platform itself, or before owners were recorded) is workspace-wide.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from documents import credentials
from documents.models import DocumentVersion, Membership, Tenant, WebhookEndpoint, WebhookMessage
from documents.principals import Viewer
from documents.texts import Text
from documents.visibility import seen_among, viewer_for
from documents.webhooks.delivery import TargetRefused, check_target, dispatch_message
from jobs.models import Job, Status

DOCUMENT_READY = "document.ready"
DOCUMENT_FAILED = "document.failed"
DOCUMENT_CANCELLED = "document.cancelled"
DOCUMENT_DELETED = "document.deleted"
BATCH_COMPLETED = "batch.completed"
REINDEX_COMPLETED = "reindex.completed"
# A source's sync finished (docs/sources.md): its counts, the same for every member.
SOURCE_SYNCED = "source.synced"
EVENTS = (
    DOCUMENT_READY,
    DOCUMENT_FAILED,
    DOCUMENT_CANCELLED,
    DOCUMENT_DELETED,
    BATCH_COMPLETED,
    REINDEX_COMPLETED,
    SOURCE_SYNCED,
)
_BY_STATUS = {
    Status.READY: DOCUMENT_READY,
    Status.FAILED: DOCUMENT_FAILED,
    Status.CANCELLED: DOCUMENT_CANCELLED,
}
MAX_ENDPOINTS = 20


class WebhookInvalid(Exception):
    """A registration refused with a user-safe reason (400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def new_secret() -> str:
    """``whsec_`` + base64 of 24 random bytes (the Standard Webhooks format)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def _check(url: str, events: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(events))
    unknown = [e for e in chosen if e not in EVENTS]
    if not chosen or unknown:
        message = Text(gettext_noop("Choose one or more of: %(events)s."), events=", ".join(EVENTS))
        raise WebhookInvalid("invalid_events", message)
    try:
        check_target(url)
    except TargetRefused as exc:
        raise WebhookInvalid("webhook_target_refused", exc.reason) from None
    return chosen


def webhook_endpoint_create(
    *, tenant: Tenant, url: str, events: Iterable[str], description: str = "", user: Any = None
) -> WebhookEndpoint:
    """Register an endpoint; its ``secret`` is in the returned object and never shown again."""
    chosen = _check(url, events)
    if WebhookEndpoint.objects.filter(tenant=tenant).count() >= MAX_ENDPOINTS:
        message = Text(gettext_noop("A workspace can have at most %(count)s endpoints."), count=MAX_ENDPOINTS)
        raise WebhookInvalid("too_many_endpoints", message)
    owner = user if isinstance(user, get_user_model()) else None
    endpoint = WebhookEndpoint(
        tenant=tenant, url=url, events=chosen, description=description, created_by=owner
    )
    endpoint.secret = new_secret()  # stored encrypted; the caller shows it once
    endpoint.save(force_insert=True)
    return endpoint


def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str | None = None,
    events: Iterable[str] | None = None,
    enabled: bool | None = None,
    description: str | None = None,
) -> WebhookEndpoint:
    """Change an endpoint; enabling it again clears the notice of why it was disabled."""
    chosen = _check(url or endpoint.url, endpoint.events if events is None else events)
    fields: dict[str, Any] = {"events": chosen}
    if url is not None:
        fields["url"] = url
    if description is not None:
        fields["description"] = description
    if enabled is not None:
        fields["enabled"] = enabled
        if enabled:
            fields.update(disabled_at=None, disabled_reason="")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(**fields)
    endpoint.refresh_from_db()
    return endpoint


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove an endpoint with its messages and their delivery log."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()


# What an event says: the same for every endpoint, or made for each endpoint's reader (None: a
# workspace-wide endpoint) from what that reader may see.
EventData = dict[str, Any] | Callable[[Viewer | None], dict[str, Any]]


def event_emit(
    *, tenant: Tenant, event_type: str, data: EventData, document_id: Any = None
) -> list[WebhookMessage]:
    """Write ``event_type`` for every enabled endpoint of ``tenant`` subscribed to it whose owner
    may see ``document_id`` (the document the event is about, if any) now; each is sent after
    the surrounding transaction commits. Call it inside that transaction."""
    endpoints = [
        e for e in WebhookEndpoint.objects.filter(tenant=tenant, enabled=True) if event_type in e.events
    ]
    if not endpoints:
        return []
    readers = _readers(tenant, endpoints)
    now = timezone.now()
    messages = []
    seen: dict[int, bool] = {}
    for endpoint in endpoints:
        if endpoint.created_by_id is not None and endpoint.created_by_id not in readers:
            continue  # its owner left the workspace or was deactivated: told nothing
        reader = readers.get(endpoint.created_by_id) if endpoint.created_by_id is not None else None
        if document_id is not None and reader is not None and reader.user_id is not None:
            if reader.user_id not in seen:
                seen[reader.user_id] = bool(seen_among(reader, [document_id]))
            if not seen[reader.user_id]:
                continue
        payload = data(reader) if callable(data) else data
        messages.append(
            WebhookMessage(
                id=uuid.uuid4(),
                endpoint=endpoint,
                event_type=event_type,
                payload={"type": event_type, "timestamp": now.isoformat(), "data": payload},
                next_attempt_at=now,
                created_at=now,
            )
        )
    if not messages:
        return []
    WebhookMessage.objects.bulk_create(messages)
    ids = [m.pk for m in messages]
    transaction.on_commit(lambda: _dispatch_all(ids))
    return messages


def _readers(tenant: Tenant, endpoints: list[WebhookEndpoint]) -> dict[int, Viewer]:
    """Each endpoint owner who is an active member of ``tenant``, as a caller there."""
    owner_ids = {e.created_by_id for e in endpoints if e.created_by_id is not None}
    if not owner_ids:
        return {}
    members = Membership.objects.filter(tenant=tenant, user_id__in=owner_ids, user__is_active=True)
    return {m.user_id: viewer_for(m.user, tenant) for m in members.select_related("user")}


def _dispatch_all(ids: list[uuid.UUID]) -> None:
    for pk in ids:
        dispatch_message(pk)


def document_job_event(job: Job) -> None:
    """``document.ready``, ``.failed`` or ``.cancelled`` for a finished ingestion job."""
    event_type = _BY_STATUS.get(Status(job.status))
    version = (
        DocumentVersion.objects.filter(pk=job.payload.get("version_id"))
        .select_related("document__tenant")
        .first()
    )
    if event_type is None or version is None:
        return
    data: dict[str, Any] = {
        "document_id": str(version.document_id),
        "version": version.number,
        "job_id": str(job.pk),
        "state": job.state_word(),
    }
    if job.status == Status.FAILED:
        data["error"] = {"code": job.error_code, "message": job.error_message}
    event_emit(
        tenant=version.document.tenant, event_type=event_type, data=data, document_id=version.document_id
    )


def webhook_message_resend(*, message_id: Any) -> None:
    """Send a message again (an operator's "send again"), whatever happened to it before."""
    WebhookMessage.objects.filter(pk=message_id).update(
        state=WebhookMessage.State.PENDING, next_attempt_at=timezone.now(), dispatched_at=None
    )
    transaction.on_commit(lambda: dispatch_message(message_id))


def webhook_secrets_reencrypt() -> tuple[int, int]:
    """Encrypt every endpoint's signing secret again with the current ``SECRET_KEY`` (after a
    rotation, before the old key leaves ``SECRET_KEY_FALLBACKS``); ``(done, unreadable)``."""
    return credentials.reencrypt_rows(WebhookEndpoint.objects.all(), "secret_encrypted")
