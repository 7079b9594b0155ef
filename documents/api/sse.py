"""``GET /api/documents/{document_id}/jobs/{job_id}/events``: Server-Sent Events, async end to end.

Each event carries ``id:`` (the event log id), ``event:`` (``status`` or ``progress``) and
``data:`` (the status JSON of the status endpoint, as of that event: ``JobStatusOut`` rendered
from the event row, ``documents/api/output.py``). Without ``Last-Event-ID``
the stream opens with the current status; with it, it replays exactly what was missed. It sends
keep-alive comments and ends after a terminal status. The event log is the truth: the stream
only notifies, and a client that lost it recovers everything from the status endpoint.

Access is checked when the stream opens and again while it stays open: the read that finds new
events also says (inside its own query) whether the document is open to everyone; when it is
not, the stream checks the caller's access again (one query, the status poll's) before sending
them, and at least once per keep-alive period while it waits. A caller who may no longer see
the document gets nothing more: the stream ends as it would for a document that is gone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, Subquery
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.utils.translation import gettext_noop
from django.views.decorators.csrf import csrf_exempt

from documents.api import notify, sse_access, sse_caps
from documents.api.output import error_body, job_status, job_status_as_of
from documents.models import DocumentGrant, DocumentVersion
from documents.principals import EVERYONE
from jobs.models import Job, JobEvent

FINAL = {"ready", "cancelled", "failed"}
_MAX_ID_DIGITS = 18  # below 2**63


def _snapshot(version: DocumentVersion, job: Job, event: JobEvent, current: dict[str, Any]) -> dict[str, Any]:
    """The status as of ``event`` (the current status when the event is the latest transition)."""
    if event.job_version == job.version and event.kind == JobEvent.Kind.TRANSITION:
        return current
    return job_status_as_of(version, job, event)


class Rendered(NamedTuple):
    """One read: the events rendered as SSE text, whether the stream is done, and whether the
    document is open to everyone in its workspace (then no stream needs to check access again)."""

    events: list[tuple[int, str]]
    done: bool
    open_to_all: bool


def _events_after(version_pk: Any, last_id: int | None) -> Rendered:
    """Events of the version's job after ``last_id`` (or just the current status when None),
    rendered as SSE text, whether the stream is done and whether the document is open to all.

    Runs in a worker thread; its connection is closed after each read so that open streams do
    not each hold a database connection between wakes.
    """
    try:
        events, done, open_to_all = _read_events(version_pk, last_id)
        rendered = [(event_id, _format(event_id, name, data)) for event_id, name, data in events]
        return Rendered(rendered, done, open_to_all)
    finally:
        connection.close()


class SharedReads:
    """One read per (version, last event id) at a time, shared by the streams that wait for it.

    A job with a thousand subscribers wakes them all with one notification; they would all read
    and render the same rows. A stream joins a read only while it has not started: a read that
    already started may have run before the commit that woke the newcomer, which then starts
    its own.
    """

    def __init__(self) -> None:
        self.pending: dict[tuple[Any, int | None], asyncio.Future[Rendered]] = {}

    async def read(self, version_pk: Any, last_id: int | None) -> Rendered:
        key = (version_pk, last_id)
        future = self.pending.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            self.pending[key] = future
            asyncio.get_running_loop().create_task(self._run(key, future))
        # Shielded: one subscriber leaving must not cancel the read the others wait for.
        return await asyncio.shield(future)

    async def _run(self, key: tuple[Any, int | None], future: asyncio.Future[Rendered]) -> None:
        await asyncio.sleep(0)  # the streams woken by the same notification join here
        del self.pending[key]
        try:
            result = await sync_to_async(_events_after)(*key)
        except Exception as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)


def _retrieve(future: asyncio.Future[Rendered]) -> None:
    if not future.cancelled():
        future.exception()  # every subscriber may have left: not an "exception never retrieved"


_shared: dict[int, SharedReads] = {}


def shared_reads() -> SharedReads:
    loop_id = id(asyncio.get_running_loop())
    if loop_id not in _shared:
        _shared[loop_id] = SharedReads()
    return _shared[loop_id]


def _version(version_pk: Any) -> DocumentVersion:
    """The version with its job and document, and (in the same query) whether the document is
    granted to everyone: the common case, which then costs no access check per event."""
    everyone = DocumentGrant.objects.filter(document_id=OuterRef("document_id"), principal=EVERYONE)
    return (
        DocumentVersion.objects.select_related("job", "document")
        .annotate(open_to_all=Exists(everyone))
        .get(pk=version_pk)
    )


def _read_events(
    version_pk: Any, last_id: int | None
) -> tuple[list[tuple[int, str, dict[str, Any]]], bool, bool]:
    if last_id is None:
        # The id is read before the job: a transition committing in between then shows up as a
        # newer event on the next read instead of being labelled with stale data.
        job_id = DocumentVersion.objects.filter(pk=version_pk).values_list("job_id", flat=True).get()
        latest = (
            JobEvent.objects.filter(job_id=job_id).order_by("-id").values_list("id", flat=True).first() or 0
        )
        version = _version(version_pk)
        assert version.job is not None
        current = job_status(version, version.job)
        last_event_is_current = not JobEvent.objects.filter(job_id=job_id, id__gt=latest).exists()
        done = version.job.status in FINAL and last_event_is_current
        return [(latest, "status", current)], done, bool(version.open_to_all)  # type: ignore[attr-defined]
    # The events are read before the job: the job is then at least as new as every event read,
    # so none is labelled with older facts (a publish committing between the two reads would
    # otherwise go out as "ready" without its finish and publication times). An event newer
    # than the job read here is sent by the next read.
    of_version = Subquery(DocumentVersion.objects.filter(pk=version_pk).values("job_id"))
    rows = list(JobEvent.objects.filter(job_id=of_version, id__gt=last_id).order_by("id")[:500])
    version = _version(version_pk)
    job = version.job
    assert job is not None
    current = job_status(version, job)
    out = [
        (
            e.id,
            "progress" if e.kind == JobEvent.Kind.PROGRESS else "status",
            _snapshot(version, job, e, current),
        )
        for e in rows
    ]
    # Finished when the job is final and nothing older than its final state is still to send
    # (a client reconnecting after the end gets nothing more and the stream closes).
    done = job.status in FINAL and (not rows or rows[-1].job_version == job.version)
    return out, done, bool(version.open_to_all)  # type: ignore[attr-defined]


def _format(event_id: int, name: str, data: dict[str, Any]) -> str:
    return f"id: {event_id}\nevent: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _stream(
    version_pk: Any,
    job_id: str,
    last_id: int | None,
    user_id: Any,
    still_visible: Any = None,
) -> AsyncIterator[str]:
    """``still_visible`` (None for a caller who sees every document) answers, in a worker
    thread, whether the caller may still see the document."""
    keepalive = settings.SSE_KEEPALIVE_SECONDS
    # The client reconnects with Last-Event-ID and misses nothing; a bounded lifetime keeps a
    # forgotten stream from holding its slot (and a server thread) forever.
    ends_at = time.monotonic() + settings.SSE_MAX_STREAM_SECONDS
    # The slot is taken here, when the stream starts, and given back in the finally below: a
    # client that hangs up before the first byte (the view or middleware still running, the
    # headers not sent) never starts this generator, and then holds no slot. Counting it in the
    # view left such clients locked out (429 with no stream open) and the total drifting up.
    if await sse_caps.astream_open(user_id) is not None:  # another stream took the last slot
        yield "retry: 5000\n\n" + _format(0, "error", {"code": "too_many_streams"})
        return
    wake = None
    try:
        wake = notify.subscribe(job_id)  # before the first read, so no commit can slip between
        yield "retry: 2000\n\n"
        reads = shared_reads()
        quiet_since = checked_at = time.monotonic()
        while time.monotonic() < ends_at:
            events, done, open_to_all = await reads.read(version_pk, last_id)
            # Before sending a restricted document's events, and once a keep-alive period while
            # quiet: the caller may have lost access since the stream opened (a list changed,
            # a group membership or the permission went). Open to everyone: nothing to check.
            due = bool(events) or time.monotonic() - checked_at >= keepalive
            if still_visible is not None and not open_to_all and due:
                if not await sync_to_async(still_visible)():
                    return  # as for a document that is gone: nothing more is sent
                checked_at = time.monotonic()
            if events:
                yield "".join(text for _, text in events)
                last_id = events[-1][0]
            if done:
                return
            if events:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= keepalive:
                yield ": keep-alive\n\n"
                quiet_since = time.monotonic()
            await notify.wait_for_change(job_id, wake, min(keepalive, max(0.0, ends_at - time.monotonic())))
    finally:
        notify.unsubscribe(job_id, wake)
        await sse_caps.astream_closed(user_id)


@csrf_exempt  # read-only; other methods get a 405 in the error shape instead of a CSRF page
async def job_events(request: HttpRequest, document_id: str, job_id: str) -> HttpResponseBase:
    if request.method not in ("GET", "HEAD"):
        refused = JsonResponse(
            error_body("method_not_allowed", gettext_noop("This method is not allowed here.")), status=405
        )
        refused["Allow"] = "GET, HEAD"
        return refused
    code, version, user_id, viewer = await sync_to_async(sse_access.resolve)(request, document_id, job_id)
    if version is None:
        names = {401: "not_authenticated", 403: "permission_denied", 404: "not_found"}
        messages = {
            401: "Authentication is required: send a token or log in.",
            403: "Your account does not belong to a workspace.",
            404: "Not found.",
        }
        if code == 401 and sse_access.sent_token(request) is not None:  # sent, and refused
            messages[401] = "The token is not valid: it is wrong or was revoked."
        return JsonResponse(error_body(names[code], messages[code]), status=code)
    header = request.headers.get("Last-Event-ID", "").strip()
    # An event id is a positive 64-bit integer: longer digit strings are refused before int()
    # (5,000 digits passed Python's own digit limit and answered 500).
    if header and not (header.isascii() and header.isdigit() and len(header) <= _MAX_ID_DIGITS):
        return JsonResponse(
            error_body(
                "invalid_last_event_id", gettext_noop("Last-Event-ID must be an event id from this stream.")
            ),
            status=400,
        )
    last_id = int(header) if header else None
    limited = await sse_caps.arefusal_response(user_id)
    if limited is not None:
        return limited
    still_visible = None
    if viewer is not None and not viewer.sees_all_already:
        still_visible = partial(sse_access.still_visible, viewer, version.document_id, version.job_id)
    return sse_caps.event_stream(_stream(version.pk, str(version.job_id), last_id, user_id, still_visible))
