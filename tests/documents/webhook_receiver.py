"""A real webhook receiver for tests (stdlib ``http.server`` in a thread on 127.0.0.1) and an
independent check of Standard Webhooks signatures written from the specification with hmac and
hashlib only (not with the code under test, nor with the library it signs with)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import serve_in_thread


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Receiver(ThreadingHTTPServer):
    """Answers each POST with the next scripted status (then ``default``) and keeps what came."""

    daemon_threads = True

    def __init__(self, replies: list[int], default: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: deque[int] = deque(replies)
        self.default = default
        self.received: list[Delivery] = []
        self.lock = threading.Lock()
        # When set by a test, each request waits for it before answering (a slow endpoint).
        self.hold: threading.Event | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hooks"

    def next_status(self) -> int:
        with self.lock:
            return self.replies.popleft() if self.replies else self.default


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.received.append(Delivery(self.path, headers, body))
        if self.server.hold is not None:
            self.server.hold.wait(30)
        status = self.server.next_status()
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", "/elsewhere")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@contextmanager
def receiver(replies: list[int] | None = None, default: int = 200) -> Iterator[Receiver]:
    server = Receiver(replies or [], default)
    serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def signature_valid(secret: str, delivery: Delivery, tolerance: float = 300) -> bool:
    """The Standard Webhooks check: base64-decode the secret after ``whsec_``, HMAC-SHA256 of
    ``id.timestamp.body``, compare with each ``v1,`` entry; the timestamp within tolerance."""
    headers = delivery.headers
    msg_id, stamp, signatures = (
        headers["webhook-id"],
        headers["webhook-timestamp"],
        headers["webhook-signature"],
    )
    if abs(time.time() - int(stamp)) > tolerance:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + delivery.body, hashlib.sha256).digest()
    expected = base64.b64encode(digest).decode()
    return any(
        version == "v1" and hmac.compare_digest(value, expected)
        for version, _, value in (entry.partition(",") for entry in signatures.split(" "))
    )


class Trickler:
    """A real endpoint that never finishes answering: it accepts each connection, reads the
    request and then sends its status line and endless headers one byte every ``every`` seconds
    (each read of the sender gets its byte well within a per-read timeout)."""

    def __init__(self, every: float = 1.0) -> None:
        self.every = every
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.stop = threading.Event()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hooks"

    def serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.trickle, args=(conn,), daemon=True).start()

    def trickle(self, conn: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100_000
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                for byte in answer:
                    if self.stop.wait(self.every):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return  # the sender gave up and closed


@contextmanager
def trickler(every: float = 1.0) -> Iterator[Trickler]:
    server = Trickler(every)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        thread.join(5)
        server.listener.close()
