"""One origin, two Django handlers: sync views through the WSGI handler, async views through ASGI.

Django's ASGI handler runs every sync middleware method and every sync view through
``sync_to_async``: about twenty thread hand-offs per API request, which kept a process far below
what gunicorn's sync workers serve (bench/README.md, "Target 1 met: one server, two Django
handlers"). The JSON API and the pages are
sync views, so they go to Django's WSGI handler instead, run whole on a thread of a small pool
(``a2wsgi``, with a responder that does not make the thread wait for the loop to take each
message), once their body has been read on the event loop. Async
views (the SSE event stream) stay on the ASGI handler, where a thousand open streams cost no
threads and no database connections.

The choice is made per request by resolving the path against the urlconf once per path shape, so
a new async view needs no list kept in step here.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from functools import lru_cache
from typing import Any, cast

from a2wsgi import WSGIMiddleware
from a2wsgi.asgi_typing import HTTPScope
from a2wsgi.wsgi import WSGIResponder
from django.urls import Resolver404, get_resolver

Scope = MutableMapping[str, Any]

_IN_MEMORY = 1024 * 1024  # request bodies up to this stay in memory while they are buffered
_CHUNK = 64 * 1024
ASGIApp = Callable[..., Awaitable[None]]


# Ids in the path make most URLs distinct: the cache holds the recent ones (a status poll asks the
# same path again and again); a miss costs one resolve, tens of microseconds.
@lru_cache(maxsize=4096)
def is_async_view(path_info: str) -> bool:
    """Whether the view for ``path_info`` (without the script prefix) is a coroutine function.

    Unknown paths answer False: Django's 404 comes from the sync handler like any page.
    """
    try:
        match = get_resolver().resolve(path_info)
    except Resolver404:
        return False
    return asyncio.iscoroutinefunction(match.func)


class ViewKindDispatcher:
    """Send HTTP requests for sync views to ``wsgi_app`` on a thread pool, the rest to ``asgi_app``."""

    def __init__(self, *, asgi_app: ASGIApp, wsgi_app: Any, threads: int) -> None:
        self.asgi_app = asgi_app
        self.wsgi = _WSGI(wsgi_app, workers=threads)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not is_async_view(_path_info(scope)):
            body = await _Body.read(receive)
            if body is None:
                return  # the client went away before its body arrived
            with body:
                await self.wsgi(cast(HTTPScope, scope), body.receive, send)
            return
        await self.asgi_app(scope, receive, send)


class _Body(contextlib.AbstractContextManager["_Body"]):
    """The whole request body, read on the event loop before a thread is given to the request: a
    client that sends its upload slowly holds a coroutine, not one of the few sync threads.
    ``receive`` hands it to the sync handler as ASGI messages, then waits for the disconnect."""

    def __init__(self, receive: Any, first: dict[str, Any] | None, spool: Any) -> None:
        self._receive, self._first, self._spool = receive, first, spool

    @classmethod
    async def read(cls, receive: Any) -> _Body | None:
        """None if the client disconnected first. A body in one message (every GET) is kept as it
        came; longer ones are spooled, spilling to a temporary file past 1 MiB (the body limit in
        front has already bounded them)."""
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        if not message.get("more_body", False):
            return cls(receive, message, None)
        spool = tempfile.SpooledTemporaryFile(max_size=_IN_MEMORY)  # noqa: SIM115 - closed by __exit__
        while message.get("more_body", False):
            spool.write(message.get("body", b""))
            message = await receive()
            if message["type"] == "http.disconnect":
                spool.close()
                return None
        spool.write(message.get("body", b""))
        spool.seek(0)
        return cls(receive, None, spool)

    async def receive(self) -> dict[str, Any]:
        if self._first is not None:
            message, self._first = self._first, None
            return message
        if self._spool is None or self._spool.closed:
            return dict(await self._receive())  # after the body: wait for the disconnect
        chunk = self._spool.read(_CHUNK)
        more = len(chunk) == _CHUNK
        if not more:
            self._spool.close()
        return {"type": "http.request", "body": chunk, "more_body": more}

    def __exit__(self, *exc: object) -> None:
        if self._spool is not None:
            self._spool.close()


class _Responder(WSGIResponder):
    """a2wsgi's responder, except that the request's thread does not wait for the event loop to
    take each message (a2wsgi hands every message over and waits): it waits only while
    ``send_queue_size`` messages are still unsent, i.e. for a slow reader of a long body. A small
    JSON answer leaves the thread at once, which is most of what the thread was waiting for."""

    def __init__(self, app: Any, executor: Any, send_queue_size: int) -> None:
        super().__init__(app, executor, send_queue_size)
        self.send_queue = asyncio.Queue()  # bounded by ``room`` instead
        self.room = threading.Semaphore(send_queue_size)
        self.gone = False

    def send(self, message: Any) -> None:
        if self.gone:
            return  # the client is gone: the rest of the body goes nowhere
        self.room.acquire()
        if not self.gone:
            self.loop.call_soon_threadsafe(self.send_queue.put_nowait, message)

    async def sender(self, send: Any) -> None:
        try:
            while (message := await self.send_queue.get()) is not None:
                await send(message)
                self.room.release()
        finally:
            # Nothing more is sent (done, or the send failed): a waiting thread must not hang.
            self.gone = True
            self.room.release()


class _WSGI(WSGIMiddleware):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await _Responder(self.app, self.executor, self.send_queue_size)(scope, receive, send)


def _path_info(scope: Scope) -> str:
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"
