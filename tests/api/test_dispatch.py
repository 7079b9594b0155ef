"""The sync-view bridge of config/dispatch.py, on its own: a WSGI app behind it, driven as the
ASGI server drives it (no database, no server)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from config.dispatch import ViewKindDispatcher
from tests.conftest import wait_for_async

CHUNKS = [b"chunk %03d;" % i for i in range(60)]  # several times the bridge's queue of 10


def scope(path: str = "/no/such/page") -> dict[str, Any]:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"content-length", b"11")],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }


class StreamingApp:
    """Echoes the request body, then streams ``CHUNKS``; records when its thread is done."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.body = b""
        self.yielded = 0  # chunks handed to the server so far

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        self.body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return self.stream()

    def stream(self) -> Iterator[bytes]:
        try:
            for chunk in [self.body, *CHUNKS]:
                self.yielded += 1
                yield chunk
        finally:
            self.finished.set()


def run(app: StreamingApp, send: Any, *, body_parts: list[bytes]) -> None:
    parts = list(body_parts)

    async def receive() -> dict[str, Any]:
        if parts:
            chunk = parts.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(parts)}
        await asyncio.Event().wait()  # no disconnect while the response is sent
        raise AssertionError("unreachable")

    async def asgi_app(*_: Any) -> None:
        raise AssertionError("a sync path went to the ASGI handler")

    dispatcher = ViewKindDispatcher(asgi_app=asgi_app, wsgi_app=app, threads=1)
    asyncio.run(asyncio.wait_for(dispatcher(scope(), receive, send), timeout=30))


def test_a_streamed_answer_arrives_whole_and_in_order_through_a_slow_client() -> None:
    app = StreamingApp()
    sent: list[dict[str, Any]] = []

    async def slow_send(message: dict[str, Any]) -> None:
        # A client that takes nothing until the thread has filled the queue of 10 (the start and
        # 9 chunks sent, the 10th chunk waiting for room).
        await wait_for_async(lambda: app.yielded >= 10, timeout=10, what="the queue to fill")
        sent.append(message)

    run(app, slow_send, body_parts=[b"hello", b" world"])
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert body == b"hello world" + b"".join(CHUNKS)
    assert sent[-1] == {"type": "http.response.body", "body": b""}
    assert app.finished.is_set()


def test_a_client_whose_send_fails_does_not_hold_the_thread() -> None:
    """The sender stops at the failed send; the app's thread, blocked on a full queue, must
    still finish (a hung thread would be one of the few sync threads lost for good)."""
    app = StreamingApp()
    count = 0
    # A thread that gets ahead of the loop fills the queue of 10 and waits for room.

    async def failing_send(message: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        if count == 1:  # the response's start: nothing was taken off the queue before
            raise ConnectionResetError("connection reset")

    with pytest.raises(ConnectionResetError):  # not a timeout: the request ends with the failure
        run(app, failing_send, body_parts=[b"hello world"])
    assert app.finished.wait(timeout=10)
