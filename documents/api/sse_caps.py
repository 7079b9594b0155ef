"""Caps on open event streams, per user and for the whole platform, and their maximum lifetime.

Without them, one user's streams on one job held a thread each and made another tenant wait
(docs/limits.md lists the caps). The counts live in the shared ``throttle`` cache so that every web process
sees the same totals. A stream ends after ``SSE_MAX_STREAM_SECONDS``; the client reconnects with
``Last-Event-ID`` and misses nothing. A count a crashed process never gave back expires with its
key, ``SSE_MAX_STREAM_SECONDS`` plus a minute after the last stream was opened.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache.backends.db import DatabaseCache
from django.db import connection, connections, router, transaction
from django.http import JsonResponse, StreamingHttpResponse
from django.utils.translation import gettext_noop

from documents.api.output import error_body
from documents.throttles import throttle_cache

_GLOBAL_KEY = "sse:open:all"
_T = TypeVar("_T")


def _user_key(user_id: Any) -> str:
    return f"sse:open:user:{user_id}"


def _ttl() -> float:
    return settings.SSE_MAX_STREAM_SECONDS + 60


def _add(key: str, delta: int) -> int:
    cache = throttle_cache()
    if delta > 0 and cache.add(key, delta, timeout=_ttl()):
        return delta
    with _counting(cache, key):
        try:
            value = int(cache.incr(key, delta))
        except ValueError:  # gone (expired): nothing to give back, or a fresh count
            if delta < 0:
                return 0
            cache.set(key, delta, timeout=_ttl())
            return delta
        if delta > 0:
            cache.touch(key, timeout=_ttl())
    return value


@contextlib.contextmanager
def _counting(cache: Any, key: str) -> Iterator[None]:
    """The count's read and write as one step. Redis counts atomically; the database cache's
    ``incr`` is a read and a write, so two streams of one user ending at once on PostgreSQL each
    wrote their own result and a slot was never given back: there the count's row is locked for
    the step (SQLite writes one at a time anyway)."""
    if not isinstance(cache, DatabaseCache):
        yield
        return
    db = router.db_for_write(cache.cache_model_class)
    with transaction.atomic(using=db):
        where = connections[db]
        if where.features.has_select_for_update:
            table = where.ops.quote_name(cache.cache_model_class._meta.db_table)
            with where.cursor() as cursor:
                cursor.execute(
                    f"SELECT 1 FROM {table} WHERE cache_key = %s FOR UPDATE",
                    [cache.make_and_validate_key(key)],
                )
        yield


def stream_refusal(user_id: Any) -> str | None:
    """Whether a new stream of ``user_id`` would be over a cap now (nothing is counted).

    The view asks this to answer 429 before any byte is sent; the slot itself is taken by the
    stream when it starts (``stream_open``), so a client that hangs up before it starts (while
    the view or the middleware still runs) never holds one.
    """
    cache = throttle_cache()
    if int(cache.get(_user_key(user_id), 0) or 0) >= settings.SSE_MAX_STREAMS_PER_USER:
        return "user"
    if int(cache.get(_GLOBAL_KEY, 0) or 0) >= settings.SSE_MAX_STREAMS:
        return "global"
    return None


def stream_open(user_id: Any) -> str | None:
    """Count a new stream of ``user_id``; the refusal reason (nothing counted) when over a cap."""
    per_user = _add(_user_key(user_id), 1)
    if per_user > settings.SSE_MAX_STREAMS_PER_USER:
        _add(_user_key(user_id), -1)
        return "user"
    total = _add(_GLOBAL_KEY, 1)
    if total > settings.SSE_MAX_STREAMS:
        _add(_GLOBAL_KEY, -1)
        _add(_user_key(user_id), -1)
        return "global"
    return None


def stream_closed(user_id: Any) -> None:
    _add(_user_key(user_id), -1)
    _add(_GLOBAL_KEY, -1)


def _own_connection(count: Callable[[Any], _T]) -> Callable[[Any], Awaitable[_T]]:
    """``count`` run from async code on a thread of the loop's pool, whose database connection
    (the counts' cache may be the database) is closed after each call, as the stream's reads
    do: run on the request's own thread, a count made as the client hung up outlived the
    request, and its thread's pooled connection was never given back."""

    def run(user_id: Any) -> _T:
        try:
            return count(user_id)
        finally:
            connection.close()

    return sync_to_async(run, thread_sensitive=False)


astream_refusal = _own_connection(stream_refusal)
astream_closed = _own_connection(stream_closed)


async def astream_open(user_id: Any) -> str | None:
    """``stream_open`` that a cancellation cannot leak: when the task is cancelled while the count
    is being taken (the client hung up), the count is given back as soon as it was taken."""
    taking = asyncio.ensure_future(_own_connection(stream_open)(user_id))
    try:
        return await asyncio.shield(taking)
    except asyncio.CancelledError:
        taking.add_done_callback(lambda done: _give_back_if_taken(done, user_id))
        raise


def _give_back_if_taken(taking: asyncio.Future[str | None], user_id: Any) -> None:
    if not taking.cancelled() and taking.exception() is None and taking.result() is None:
        _pending.add(task := asyncio.ensure_future(astream_closed(user_id)))
        task.add_done_callback(_pending.discard)


_pending: set[asyncio.Future[None]] = set()  # give-backs in flight (the loop keeps weak references)


async def arefusal_response(user_id: Any) -> JsonResponse | None:
    """The 429 a new stream gets while the user (or the platform) has the most streams open;
    None when it may open (the slot itself is taken when the stream starts)."""
    if await astream_refusal(user_id) is None:
        return None
    message = gettext_noop("Too many open event streams. Close one and try again.")
    limited = JsonResponse(error_body("too_many_streams", message), status=429)
    limited["Retry-After"] = "5"
    return limited


def event_stream(events: AsyncIterator[str]) -> StreamingHttpResponse:
    """``events`` as a ``text/event-stream`` answer that no cache or proxy holds back."""
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
