"""The sync-view bridge of config/dispatch.py, on its own: a WSGI app behind it, driven as the
ASGI server drives it (no database, no server)."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator
from typing import Any

from config.dispatch import ViewKindDispatcher
from config.edge import EdgeDeadlines
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


def edged(app: Any, *, send_seconds: float = 5.0) -> EdgeDeadlines:
    async def asgi_app(*_: Any) -> None:
        raise AssertionError("a sync path went to the ASGI handler")

    dispatcher = ViewKindDispatcher(asgi_app=asgi_app, wsgi_app=app, threads=1)
    return EdgeDeadlines(dispatcher, body_idle_seconds=5, body_seconds=5, send_seconds=send_seconds)


async def no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"hello world", "more_body": False}


def test_a_client_whose_send_fails_does_not_hold_the_thread() -> None:
    """a2wsgi's thread waits on a queue of 10 messages that only the sender empties; a send that
    fails (the client is gone) must not leave it waiting for good."""
    app = StreamingApp()

    async def failing_send(message: dict[str, Any]) -> None:
        raise ConnectionResetError("connection reset")

    asyncio.run(asyncio.wait_for(edged(app)(scope(), no_body, failing_send), timeout=30))
    assert app.finished.wait(timeout=10)


def test_a_client_that_takes_nothing_is_dropped_after_the_send_deadline() -> None:
    app = StreamingApp()
    sent: list[dict[str, Any]] = []

    async def stuck_send(message: dict[str, Any]) -> None:
        sent.append(message)
        await asyncio.Event().wait()

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(edged(app, send_seconds=0.5)(scope(), no_body, stuck_send), timeout=30))
    assert app.finished.wait(timeout=10)
    assert len(sent) == 1  # the start, then nothing more was tried
    assert time.monotonic() - started < 10


class FileApp:
    """Answers with a file through ``wsgi.file_wrapper``, as Django does for a FileResponse."""

    def __init__(self, data: bytes) -> None:
        self.file = io.BytesIO(data)
        self.returned = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        try:
            return environ["wsgi.file_wrapper"](self.file, 1000)
        finally:
            self.returned.set()


def test_a_file_answer_is_sent_by_the_loop_after_the_thread_is_free() -> None:
    data = bytes(range(256)) * 40  # 10,240 bytes: 11 pieces
    app = FileApp(data)
    sent: list[dict[str, Any]] = []
    thread_free_before_body: list[bool] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            thread_free_before_body.append(app.returned.is_set())
        sent.append(message)

    asyncio.run(asyncio.wait_for(edged(app)(scope(), no_body, send), timeout=30))
    assert b"".join(m.get("body", b"") for m in sent[1:]) == data
    assert all(thread_free_before_body)
    assert sent[-1]["more_body"] is False
    assert app.file.closed


def test_a_file_answer_stops_when_its_client_is_dropped() -> None:
    app = FileApp(b"x" * 100_000)
    sent: list[dict[str, Any]] = []

    async def stuck_after_two(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) > 2:
            await asyncio.Event().wait()

    asyncio.run(asyncio.wait_for(edged(app, send_seconds=0.5)(scope(), no_body, stuck_after_two), timeout=30))
    assert len(sent) == 3  # the start, one piece, the piece that was never taken
    assert app.file.closed
