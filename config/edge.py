"""Deadlines for the two halves of a request that the server's own limits do not bound.

granian (``manage.py serve_web``) bounds what happens before the application is called: the size
and count of the request's headers, the time to send them, idle keep-alive connections and the
requests a worker takes at once (docs/limits.md). Once the application runs, two waits remain
unbounded, and this ASGI middleware bounds them:

- **the request body**: every ``receive`` must bring data within ``body_idle_seconds`` and the
  whole body must have arrived ``body_seconds`` after the request started. A client past either
  gets ``408`` (when no answer has started) and the application sees a disconnect, so nothing
  waits on it any longer.
- **the response**: every ``send`` must be taken by the server within ``send_seconds``; granian
  takes a message only when the client reads (a slow reader holds a bounded buffer, not the whole
  answer). Past it the connection is dropped: the rest of the answer is discarded as the
  application produces it, and the unfinished response makes the server close the connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

_TIMEOUT_BODY = json.dumps(
    {"error": {"code": "request_timeout", "message": "The request body arrived too slowly."}}
).encode()


SEND_STATE = "edge.send"


class SendState:
    """Whether the client of a request was dropped for not reading (kept in its scope)."""

    dropped = False


class EdgeDeadlines:
    """Time limits on reading the request body and on each message of the answer."""

    def __init__(
        self, app: ASGIApp, *, body_idle_seconds: float, body_seconds: float, send_seconds: float
    ) -> None:
        self.app = app
        self.body_idle_seconds = body_idle_seconds
        self.body_seconds = body_seconds
        self.send_seconds = send_seconds

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = time.monotonic() + self.body_seconds
        state = SendState()
        scope[SEND_STATE] = state  # what streams a file asks, to stop once the client is dropped
        body_done = False
        too_slow = False
        started = False

        async def timed_receive() -> Message:
            nonlocal body_done, too_slow
            if too_slow:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()  # after the body: only the disconnect is left to wait for
            wait = min(self.body_idle_seconds, deadline - time.monotonic())
            try:
                message = await asyncio.wait_for(receive(), timeout=max(wait, 0.001))
            except TimeoutError:
                too_slow = True
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def timed_send(message: Message) -> None:
            nonlocal started
            if state.dropped:
                return  # the client stopped reading: what is left goes nowhere
            if too_slow and not started:
                return  # the application's answer to a cut-off body: the client gets the 408
            if message["type"] == "http.response.start":
                started = True
            try:
                await asyncio.wait_for(send(message), timeout=self.send_seconds)
            except (TimeoutError, OSError, RuntimeError):
                # Too slow, or gone (the server's "transport closed"): the application is never
                # told by an exception, so a thread sending a long answer (config/dispatch.py)
                # finishes instead of waiting on a queue nobody empties.
                state.dropped = True

        await self.app(scope, timed_receive, timed_send)
        if too_slow and not started:
            await _send_408(send, self.send_seconds)
        # A dropped answer is left unfinished: the server closes that connection.


async def _send_408(send: Send, seconds: float) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_TIMEOUT_BODY)).encode()),
        (b"connection", b"close"),
    ]
    try:
        await asyncio.wait_for(
            send({"type": "http.response.start", "status": 408, "headers": headers}), seconds
        )
        await asyncio.wait_for(send({"type": "http.response.body", "body": _TIMEOUT_BODY}), seconds)
    except (TimeoutError, OSError):
        pass  # the client is gone as well


def trusted_proxies() -> str:
    """The proxies whose ``X-Forwarded-For`` is believed (``FORWARDED_ALLOW_IPS``), or "" for none:
    otherwise a client could pose as any address (the /metrics allow-list, per-address throttles)."""
    return os.environ.get("FORWARDED_ALLOW_IPS", "").strip()
