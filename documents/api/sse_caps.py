"""Caps on open event streams, per user and for the whole platform, and their maximum lifetime.

Without them, one user's streams on one job held a thread each and made another tenant wait
(docs/limits.md lists the caps). The counts live in the shared ``throttle`` cache so that every web process
sees the same totals. A stream ends after ``SSE_MAX_STREAM_SECONDS``; the client reconnects with
``Last-Event-ID`` and misses nothing. A count a crashed process never gave back expires with its
key, ``SSE_MAX_STREAM_SECONDS`` plus a minute after the last stream was opened.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from documents.throttles import throttle_cache

_GLOBAL_KEY = "sse:open:all"


def _user_key(user_id: Any) -> str:
    return f"sse:open:user:{user_id}"


def _ttl() -> float:
    return settings.SSE_MAX_STREAM_SECONDS + 60


def _add(key: str, delta: int) -> int:
    cache = throttle_cache()
    if delta > 0 and cache.add(key, delta, timeout=_ttl()):
        return delta
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


astream_open = sync_to_async(stream_open)
astream_closed = sync_to_async(stream_closed)
