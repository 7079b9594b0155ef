"""Waking SSE streams when a job's event log grows.

On PostgreSQL one LISTEN connection per process receives the ``pg_notify`` that every event
insert sends at commit, and wakes the streams subscribed to that job: database connections do
not grow with the number of clients. On SQLite (one machine) streams poll the event log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import connections

from jobs.services.transition import NOTIFY_CHANNEL

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # SQLite, and the fallback while the listener reconnects


class Listener:
    """One per process (and event loop): fans PostgreSQL notifications out to subscribers."""

    def __init__(self) -> None:
        self.subscribers: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, job_id: str) -> asyncio.Event:
        self._ensure_running()
        event = asyncio.Event()
        self.subscribers[job_id].add(event)
        return event

    def unsubscribe(self, job_id: str, event: asyncio.Event) -> None:
        waiting = self.subscribers.get(job_id)
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self.subscribers[job_id]

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        import psycopg

        params = connections["default"].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("pool", None)
        delay = 0.5
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(autocommit=True, **params) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.connected.set()
                    delay = 0.5
                    async for note in conn.notifies():
                        job_id = note.payload.split(":", 1)[0]
                        for event in self.subscribers.get(job_id, ()):
                            event.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database restart: streams poll until we are back
                log.warning("event listener lost its connection (%s); reconnecting", type(exc).__name__)
            self.connected.clear()
            self._wake_all()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10)

    def _wake_all(self) -> None:
        for events in self.subscribers.values():
            for event in events:
                event.set()


_listeners: dict[int, Listener] = {}


def uses_listen() -> bool:
    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


def listener() -> Listener:
    loop_id = id(asyncio.get_running_loop())
    if loop_id not in _listeners:
        _listeners[loop_id] = Listener()
    return _listeners[loop_id]


async def wait_for_change(job_id: str, wake: asyncio.Event | None, timeout: float) -> None:
    """Return when the job may have new events, or after ``timeout`` seconds."""
    if wake is None or not listener().connected.is_set():
        timeout = min(timeout, POLL_SECONDS)
    if wake is None:
        await asyncio.sleep(timeout)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout)
    wake.clear()


def subscribe(job_id: str) -> asyncio.Event | None:
    return listener().subscribe(job_id) if uses_listen() else None


def unsubscribe(job_id: str, wake: Any) -> None:
    if wake is not None:
        listener().unsubscribe(job_id, wake)
