"""Sending webhook messages from the q2 workers: signed (Standard Webhooks), SSRF-safe, bounded.

The target's addresses are resolved and checked at every send and the request goes to the very
address that was checked (the ``Host`` header and TLS name stay the URL's), so a DNS answer that
changes after registration (rebinding) cannot reach a private network. Redirects are not
followed and the response body is never read. Each attempt has one deadline,
``WEBHOOK_TIMEOUT`` seconds for all of it (resolving, connecting, TLS, sending, the answer's
headers), not a bound per read: an endpoint that trickles its answer a byte at a time is cut off
at the deadline like one that never answers.

Deliveries run in a q2 queue of their own (``WEBHOOK_QUEUE``, served by its own cluster, which
``run_platform`` starts beside the jobs' one), so a slow endpoint never occupies a worker that runs
stages. Each attempt is logged; a failed one is retried on the schedule of
``WEBHOOK_RETRY_SCHEDULE`` by the reaper's sweep, and a message out of attempts disables its
endpoint with a notice.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task
from standardwebhooks.webhooks import Webhook

from documents.credentials import SecretUnreadable
from documents.limiter import DatabaseLimiter
from documents.models import WebhookAttempt, WebhookEndpoint, WebhookMessage
from documents.outbound import TargetRefused, check_url, is_public, pinned, tls_context
from jobs.broker import enqueue_broker
from jobs.errors import StageFailure

log = logging.getLogger(__name__)

TASK = "documents.webhooks.delivery.deliver"
TASK_OPTIONS = {"ack_failure": True, "save": False}
# A task handed to the workers but not started within this long is handed out again.
REDISPATCH_AFTER = timedelta(seconds=60)
PENDING = WebhookMessage.State.PENDING
# At most WEBHOOK_MAX_CONCURRENCY deliveries send at once, counted across every process and
# machine (the delivery workers are their own q2 cluster: they never hold a worker of the jobs).
SLOTS = "webhooks"


def check_target(url: str, timeout: float | None = None) -> list[str]:
    """The addresses ``url`` resolves to, all of them allowed (public, or any with
    ``WEBHOOK_ALLOW_PRIVATE``); :class:`TargetRefused` otherwise (also when resolving takes longer
    than ``timeout``, by default ``WEBHOOK_RESOLVE_TIMEOUT``). The rules: ``documents/outbound.py``."""
    limit = (
        settings.WEBHOOK_RESOLVE_TIMEOUT
        if timeout is None
        else min(timeout, settings.WEBHOOK_RESOLVE_TIMEOUT)
    )
    return check_url(url, limit, lambda address: settings.WEBHOOK_ALLOW_PRIVATE or is_public(address))


def retry_schedule() -> list[float]:
    return list(settings.WEBHOOK_RETRY_SCHEDULE)


def dispatch_message(message_id: Any) -> bool:
    """Hand one message to the workers and record when. Never raises (the sweep retries)."""
    try:
        options = {**TASK_OPTIONS, "broker": enqueue_broker(settings.WEBHOOK_QUEUE)}
        async_task(TASK, str(message_id), q_options=options)
    except Exception:
        log.exception("could not hand webhook message %s to the task queue", message_id)
        return False
    WebhookMessage.objects.filter(pk=message_id).update(dispatched_at=timezone.now())
    return True


def webhook_messages_sweep(limit: int) -> list[Any]:
    """The reaper's sweep: hand out messages that are due and have no live task (a retry whose
    time came, a task lost with its worker or broker)."""
    now = timezone.now()
    not_sent = (
        Q(dispatched_at=None)
        | Q(dispatched_at__lt=F("next_attempt_at"))
        | Q(dispatched_at__lt=now - REDISPATCH_AFTER)
    )
    due = WebhookMessage.objects.filter(not_sent, state=PENDING, next_attempt_at__lte=now)
    ids = list(due.order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
    return [pk for pk in ids if dispatch_message(pk)]


def deliver(message_id: str) -> str:
    """The q2 task: one attempt at sending a due message. Returns what happened."""
    now = timezone.now()
    hold_for = 3 * settings.WEBHOOK_TIMEOUT + 30
    hold = now + timedelta(seconds=hold_for)
    # The claim: only one sender at a time (a duplicate task finds it no longer due).
    due = WebhookMessage.objects.filter(pk=message_id, state=PENDING, next_attempt_at__lte=now)
    if not due.update(next_attempt_at=hold):
        return "not due"
    message = WebhookMessage.objects.select_related("endpoint").get(pk=message_id)
    endpoint = message.endpoint
    if not endpoint.enabled:
        WebhookMessage.objects.filter(pk=message.pk).update(
            state=WebhookMessage.State.FAILED, next_attempt_at=None
        )
        WebhookAttempt.objects.create(message=message, error="endpoint disabled: not sent")
        return "endpoint disabled"
    try:
        with DatabaseLimiter(settings.WEBHOOK_MAX_CONCURRENCY, wait_seconds=0, hold_seconds=hold_for).slot(
            SLOTS
        ):
            started = time.monotonic()
            status_code, error = send(endpoint, message)
            duration = int((time.monotonic() - started) * 1000)
    except StageFailure:
        # Every slot is sending: give the worker back to the jobs; the reaper hands this out again.
        WebhookMessage.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now())
        return "busy"
    WebhookAttempt.objects.create(message=message, status_code=status_code, duration_ms=duration, error=error)
    attempts = message.attempts + 1
    if status_code is not None and 200 <= status_code < 300:
        WebhookMessage.objects.filter(pk=message.pk).update(
            state=WebhookMessage.State.DELIVERED,
            attempts=attempts,
            delivered_at=timezone.now(),
            next_attempt_at=None,
        )
        return "delivered"
    schedule = retry_schedule()
    if attempts > len(schedule):
        WebhookMessage.objects.filter(pk=message.pk).update(
            state=WebhookMessage.State.FAILED, attempts=attempts, next_attempt_at=None
        )
        webhook_endpoint_disable(
            endpoint_id=endpoint.pk,
            reason=f"Disabled: {attempts} attempts to deliver {message.event_type} "
            f"since {message.created_at:%Y-%m-%d %H:%M} UTC failed (last: {error or status_code}).",
        )
        return "failed"
    next_at = timezone.now() + timedelta(seconds=schedule[attempts - 1])
    WebhookMessage.objects.filter(pk=message.pk).update(attempts=attempts, next_attempt_at=next_at)
    return "retry later"


def signed_headers(endpoint: WebhookEndpoint, message: WebhookMessage, body: str) -> dict[str, str]:
    """The Standard Webhooks headers for ``body`` (signed with the standardwebhooks library)."""
    now = timezone.now()
    return {
        "content-type": "application/json",
        "webhook-id": message.webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(endpoint.secret).sign(message.webhook_id, now, body),
        "user-agent": "document-platform-webhooks/1",
    }


def send(endpoint: WebhookEndpoint, message: WebhookMessage) -> tuple[int | None, str]:
    """POST the message once, all of it within ``WEBHOOK_TIMEOUT`` seconds: ``(status code, "")``
    when the endpoint answered, else ``(None or the code, a short error)``. Never raises."""
    limit = settings.WEBHOOK_TIMEOUT
    deadline = time.monotonic() + limit
    try:
        address = check_target(endpoint.url, timeout=limit)[0]
    except TargetRefused as exc:
        return None, exc.reason
    parts = urlsplit(endpoint.url)
    target = pinned(endpoint.url, address)
    body = json.dumps(message.payload, separators=(",", ":"), ensure_ascii=False)
    try:
        signed = signed_headers(endpoint, message, body)
    except SecretUnreadable:
        # SECRET_KEY changed without the old one in SECRET_KEY_FALLBACKS: retried, never sent unsigned.
        return None, "the endpoint's signing secret cannot be decrypted with the configured keys"
    headers = {**signed, "host": parts.netloc.rsplit("@", 1)[-1]}
    try:
        code = anyio.run(_post, target, body.encode(), headers, parts.hostname or "", deadline)
    except (TimeoutError, httpx.TimeoutException):
        return None, f"timed out after {limit:g} s"
    except httpx.HTTPError as exc:
        return None, f"connection failed ({type(exc).__name__})"
    if 300 <= code < 400:
        return code, "redirects are not followed"
    return code, "" if 200 <= code < 300 else f"HTTP {code}"


async def _post(target: str, content: bytes, headers: dict[str, str], host: str, deadline: float) -> int:
    """The request and the answer's status line and headers, cancelled at ``deadline`` (a
    ``time.monotonic()`` value) wherever it is: httpx's own timeouts bound each read, not the whole."""
    remaining = max(deadline - time.monotonic(), 0.0)
    with anyio.fail_after(remaining):
        async with (
            httpx.AsyncClient(
                timeout=httpx.Timeout(remaining),
                follow_redirects=False,
                trust_env=False,
                verify=tls_context(),
            ) as client,
            client.stream(
                "POST", target, content=content, headers=headers, extensions={"sni_hostname": host}
            ) as response,
        ):
            # The body is never read: closing the stream drops whatever the endpoint sends.
            return response.status_code


def webhook_endpoint_disable(*, endpoint_id: Any, reason: str) -> None:
    """Disable an endpoint that keeps failing, with the notice its owner and operators see."""
    WebhookEndpoint.objects.filter(pk=endpoint_id, enabled=True).update(
        enabled=False, disabled_at=timezone.now(), disabled_reason=reason[:300]
    )
