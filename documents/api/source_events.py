"""``GET /api/sources/{source_id}/events``: Server-Sent Events of a source's last sync.

Each event is ``event: sync`` with ``data:`` the sync as ``GET /api/sources/{id}`` shows it under
``last_sync`` (state, stage, progress, counts, failures), sent when it changed, its words (the
state's label, each failed item's message and the sync's own failure) said in the language of the
request that opened the stream, so the page draws them as they come; the stream ends
after the sync finished. Only members of the source's workspace may open it (any other source
is a 404, as for the source itself). The source's page follows it; the page without scripts
reloads itself instead. The stream only notifies: the source endpoint is the truth.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.utils import translation
from django.utils.translation import gettext_noop
from django.views.decorators.csrf import csrf_exempt

from documents.api import notify, sse_access, sse_caps
from documents.api.output import error_body
from documents.selectors import tenant_for
from documents.sources.models import Source
from documents.sources.selectors import last_sync, source_of, sync_out
from documents.texts import localize
from jobs.models import FINISHED


def _resolve(request: HttpRequest, source_id: str) -> tuple[int, Any, Any]:
    """The answer's status (200, 401, 403, 404), the user's id and the source's id."""
    try:
        user = sse_access._user_from_token(request) or request.user
        if user is None or not user.is_authenticated:
            return 401, None, None
        tenant = tenant_for(user)
        if tenant is None:
            return 403, None, None
        source = source_of(tenant, source_id)
        return (200, user.pk, source.pk) if source is not None else (404, None, None)
    finally:
        connection.close()


def _said(shown: dict[str, Any]) -> dict[str, Any]:
    """The sync as shown, its stored messages (the causes' and refusals' English words) said in
    the active language, as the source's page says them."""
    failures = [{**failure, "message": localize(failure["message"])} for failure in shown["failures"]]
    error = shown["error"] and {**shown["error"], "message": localize(shown["error"]["message"])}
    return {**shown, "failures": failures, "error": error}


def _read(source_pk: Any, language: str) -> tuple[dict[str, Any] | None, str, bool]:
    """The last sync as shown in ``language``, its job's id and whether it is finished (None:
    gone or none)."""
    try:
        source = Source.objects.filter(pk=source_pk).first()
        sync = last_sync(source) if source is not None else None
        if sync is None:
            return None, "", True
        with translation.override(language):
            shown = _said(sync_out(sync))
        return shown, str(sync.job_id), sync.job.status in FINISHED
    finally:
        connection.close()


async def _stream(source_pk: Any, user_id: Any, language: str) -> AsyncIterator[str]:
    keepalive = settings.SSE_KEEPALIVE_SECONDS
    ends_at = time.monotonic() + settings.SSE_MAX_STREAM_SECONDS
    if await sse_caps.astream_open(user_id) is not None:
        yield 'retry: 5000\n\nevent: error\ndata: {"code":"too_many_streams"}\n\n'
        return
    wake = None
    job_id = ""
    try:
        yield "retry: 2000\n\n"
        sent: dict[str, Any] | None = None
        quiet_since = time.monotonic()
        while time.monotonic() < ends_at:
            shown, current_job, done = await sync_to_async(_read)(source_pk, language)
            if current_job != job_id:  # the first read, or a new sync started meanwhile
                notify.unsubscribe(job_id, wake)
                job_id, wake = current_job, notify.subscribe(current_job) if current_job else None
                continue  # read again now that this job wakes us: no commit slips between
            if shown is not None and shown != sent:
                yield f"event: sync\ndata: {json.dumps(shown, separators=(',', ':'))}\n\n"
                sent = shown
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= keepalive:
                yield ": keep-alive\n\n"
                quiet_since = time.monotonic()
            if done:
                return
            await notify.wait_for_change(job_id, wake, min(keepalive, max(0.0, ends_at - time.monotonic())))
    finally:
        notify.unsubscribe(job_id, wake)
        await sse_caps.astream_closed(user_id)


@csrf_exempt  # read-only; other methods get a 405 in the error shape
async def source_events(request: HttpRequest, source_id: str) -> HttpResponseBase:
    if request.method not in ("GET", "HEAD"):
        refused = JsonResponse(
            error_body("method_not_allowed", gettext_noop("This method is not allowed here.")), status=405
        )
        refused["Allow"] = "GET, HEAD"
        return refused
    code, user_id, source_pk = await sync_to_async(_resolve)(request, source_id)
    if code != 200:
        names = {401: "not_authenticated", 403: "permission_denied", 404: "not_found"}
        messages = {
            401: "Authentication is required: send a token or log in.",
            403: "Your account does not belong to a workspace.",
            404: "Not found.",
        }
        return JsonResponse(error_body(names[code], messages[code]), status=code)
    limited = await sse_caps.arefusal_response(user_id)
    if limited is not None:
        return limited
    # The stream is read after this view returns: its words keep the request's language.
    language = translation.get_language() or settings.LANGUAGE_CODE
    return sse_caps.event_stream(_stream(source_pk, user_id, language))
