"""Refuse an over-large request body at the server layer, before Django reads it or authenticates.

The web server has no body limit of its own, and Django's ASGI handler spools the whole body to
a temporary file before any view (or authentication) runs: an unauthenticated 1 GiB POST was
written to disk before its 401. This ASGI middleware answers 413 from the ``Content-Length`` header
without reading a byte, and counts the bytes of a body without one (chunked), cutting it off once
it passes the limit. Django's upload handler (``documents.uploads``) is the second line, for WSGI.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

_BODY = json.dumps(
    {"error": {"code": "request_too_large", "message": "The request body is too large."}}
).encode()


class BodyLimitMiddleware:
    """``413 request_too_large`` for HTTP requests whose body exceeds ``max_bytes``."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _refuse(send)
            return
        received = 0
        too_large = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Django takes a disconnect as an aborted request and stops reading.
                    too_large = True
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                # The app answered a body it saw cut short (the sync handler reads it as a short
                # upload): the client gets the 413 below instead.
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, tracking_send)
        if too_large and not started:
            await _refuse(send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_BODY)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _BODY})
