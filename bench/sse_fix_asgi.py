"""DIAGNOSTIC ONLY: the ASGI application with the SSE fan-out fix that bench/sse_fanout.py suggests.

In ``documents/api/sse.py`` every open stream reads the event log itself on every wake
(``_events_after`` through ``sync_to_async``: a thread hop and two or three queries per stream).
With 1,000 subscribers on 5 jobs, one committed event means 200 identical reads of that job's log,
all through the process's pool of 8 connections. This module applies, in memory and only in the
bench server, the suggested fix: streams of the same job that were woken by the same notification
share ONE read (a "single flight" per ``(version, last_id)``). A caller only joins a read that has
not started yet, so every caller's read starts after the commit that woke it: nothing is missed.
Connections are handed back after each read (as the shipped code does since 2026-11-29 09:32).
It changes no file of the application.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

GATHER_SECONDS = 0.005  # how long the first reader waits for the others woken with it


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


def _released(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        from django.db import connections

        try:
            return fn(*args, **kwargs)
        finally:
            connections["default"].close()  # with the pool: handed back until the next read

    return inner


def _single_flight(fn: Callable[..., Any]) -> Callable[..., Any]:
    pending: dict[tuple[str, Any], _Flight] = {}
    lock = threading.Lock()

    @functools.wraps(fn)
    def inner(version_pk: Any, last_id: Any) -> Any:
        key = (str(version_pk), last_id)
        with lock:
            flight = pending.get(key)
            leader = flight is None
            if flight is None:
                flight = pending[key] = _Flight()
        if leader:
            time.sleep(GATHER_SECONDS)
            with lock:
                pending.pop(key, None)  # from here on, newcomers start their own read
            try:
                flight.result = fn(version_pk, last_id)
            except BaseException as exc:
                flight.error = exc
            finally:
                flight.done.set()
        else:
            flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return flight.result

    return inner


def _patch() -> None:
    from documents.api import sse

    reader = getattr(sse, "_read_events", None) or sse._events_after
    sse._events_after = _single_flight(_released(reader))  # type: ignore[method-assign]


_patch()
