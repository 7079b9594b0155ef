"""One origin, two Django handlers: sync views through the WSGI handler, async views through ASGI.

Django's ASGI handler runs every sync middleware method and every sync view through
``sync_to_async``: about twenty thread hand-offs per API request, which kept a process far below
what gunicorn's sync workers serve (bench/README.md, "Target 1 met: one server, two Django
handlers"). The JSON API and the pages are sync views, so they go to Django's WSGI handler
instead, run whole on a thread of a small pool by ``a2wsgi``'s ``WSGIMiddleware`` as it ships.
Async views (the SSE event stream) stay on the ASGI handler, where a thousand open streams cost no
threads and no database connections.

A small body (up to ``DISPATCH_READ_AHEAD_BYTES``, every JSON request) is read on the event loop,
in memory, before a thread is given to the request: a client that sends it slowly holds a
coroutine (until the body deadline of config/edge.py), not one of the few sync threads. A larger
body (an upload) is not read ahead and never spooled by the server: the view reads it from the
connection, and only once the request is authenticated (``config.body_auth``), so an
unauthenticated upload costs neither a temporary file nor more than its refusal.

A file the view answers with (``FileResponse``: a /v1 download) is not sent from the thread either:
the thread hands it over through ``wsgi.file_wrapper`` (the WSGI server's way to send a file, which
Django uses when it is offered) and returns; the event loop reads it a piece at a time and sends
each piece when the client takes the previous one. A client that does not read holds a coroutine
and one piece, not the thread, and is dropped after the send deadline of config/edge.py.

The choice is made per request by resolving the path against the urlconf once per path shape, so
a new async view needs no list kept in step here.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from functools import lru_cache
from typing import IO, Any, cast

from a2wsgi import WSGIMiddleware
from a2wsgi.asgi_typing import HTTPScope
from django.urls import Resolver404, get_resolver

from config.edge import SEND_STATE

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]

DISPATCH_READ_AHEAD_BYTES = 1024 * 1024


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


class _FileHandOff:
    """The file a sync view answered with, handed from the request's thread to the event loop."""

    def __init__(self) -> None:
        self.file: IO[bytes] | None = None
        self.piece = 64 * 1024


# Set by the dispatcher for each request; a2wsgi runs the WSGI application in a copy of the
# calling context, so the thread sees the same hand-off object.
_HAND_OFF: contextvars.ContextVar[_FileHandOff | None] = contextvars.ContextVar("hand_off", default=None)


class _Handed:
    """The WSGI iterable of a handed-over file: empty (the loop sends the file), and closing it in
    the thread leaves the file open for the loop."""

    def __iter__(self) -> Iterator[bytes]:
        return iter(())

    def close(self) -> None:
        pass


def _file_wrapper(filelike: IO[bytes], block_size: int = 64 * 1024) -> Any:
    hand_off = _HAND_OFF.get()
    if hand_off is None:  # not under the dispatcher: send it from this thread as plain WSGI
        return iter(lambda: filelike.read(block_size), b"")
    hand_off.file, hand_off.piece = filelike, block_size
    return _Handed()


def _offering_file_wrapper(wsgi_app: Any) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        environ["wsgi.file_wrapper"] = _file_wrapper
        return wsgi_app(environ, start_response)

    return app


class ViewKindDispatcher:
    """Send HTTP requests for sync views to ``wsgi_app`` on a thread pool, the rest to ``asgi_app``."""

    def __init__(self, *, asgi_app: ASGIApp, wsgi_app: Any, threads: int) -> None:
        self.asgi_app = asgi_app
        self.wsgi = WSGIMiddleware(_offering_file_wrapper(wsgi_app), workers=threads)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not is_async_view(_path_info(scope)):
            if _small_body(scope):
                ahead = await _read_ahead(receive)
                if ahead is None:
                    return  # the client went away (or was too slow) before its body arrived
                receive = ahead
            await self._sync_view(scope, receive, send)
            return
        await self.asgi_app(scope, receive, send)

    async def _sync_view(self, scope: Scope, receive: Any, send: Any) -> None:
        hand_off = _FileHandOff()
        held: list[Any] = []

        async def holding_send(message: Any) -> None:
            # The end of a handed-over file's answer waits until the loop has sent the file.
            last = message["type"] == "http.response.body" and not message.get("more_body", False)
            if last and hand_off.file is not None:
                held.append(message)
                return
            await send(message)

        context_token = _HAND_OFF.set(hand_off)
        try:
            await self.wsgi(cast(HTTPScope, scope), receive, holding_send)
        finally:
            _HAND_OFF.reset(context_token)
        if hand_off.file is not None:
            await _send_file(scope, hand_off.file, hand_off.piece, send)
        elif held:
            await send(held[-1])


async def _send_file(scope: Scope, file: IO[bytes], piece: int, send: Any) -> None:
    """``file`` a piece at a time (read on a helper thread), each piece sent when the client has
    taken the one before; closed at the end (Django's response closes with it)."""
    state = scope.get(SEND_STATE)
    try:
        while piece_bytes := await asyncio.to_thread(file.read, piece):
            await send({"type": "http.response.body", "body": piece_bytes, "more_body": True})
            if state is not None and state.dropped:
                return  # the client stopped reading: the connection is closed unfinished
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await asyncio.to_thread(file.close)


def _small_body(scope: Scope) -> bool:
    """Whether the request declares a body the read-ahead takes (none, or a short one)."""
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value) <= DISPATCH_READ_AHEAD_BYTES
            except ValueError:
                return False
        if name == b"transfer-encoding":
            return False
    return True


async def _read_ahead(receive: Any) -> Any:
    """The whole (small) body read now, as a ``receive`` that gives it back in one message, then
    waits for the disconnect; None if the client disconnected first."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    pending: list[dict[str, Any]] = [{"type": "http.request", "body": b"".join(parts), "more_body": False}]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


def _path_info(scope: Scope) -> str:
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"
