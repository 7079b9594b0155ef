"""A real web site for the web source tests: stdlib ``http.server`` in a thread, on a loopback
address, serving scripted pages and keeping every request it got (path and headers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import serve_in_thread


@dataclass
class Page:
    body: bytes | str = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # Never answer (until the site stops): a server that hangs.
    hang: bool = False


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    # When it arrived (time.monotonic()).
    at: float = 0.0


def html(*links: str, text: str = "", title: str = "Page") -> str:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p><ul>{anchors}</ul></body></html>"


class Site(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.host = host
        self.pages: dict[str, Page] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        # Requests from this index on wait for ``release`` before they are answered.
        self.hold_from: int | None = None
        self.release = threading.Event()
        # The paths answered 304 Not Modified (a request whose If-None-Match is the page's ETag).
        self.not_modified: list[str] = []

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.server_address[1]}/"

    def url(self, path: str) -> str:
        return self.root + path.lstrip("/")

    def paths(self) -> list[str]:
        with self.lock:
            return [r.path for r in self.requests]

    def page_paths(self) -> list[str]:
        """The paths asked for, robots.txt left out."""
        return [path for path in self.paths() if path != "/robots.txt"]


class _Handler(BaseHTTPRequestHandler):
    server: Site
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.requests.append(Request(self.path, headers, time.monotonic()))
            held = self.server.hold_from is not None and len(self.server.requests) > self.server.hold_from
            page = self.server.pages.get(self.path)
        if held:
            self.server.release.wait(60)
        if page is None:
            page = Page("not here", "text/plain", status=404)
        if page.hang:
            self.server.stopping.wait(120)
            return
        etag = {k.lower(): v for k, v in page.headers.items()}.get("etag")
        if etag and headers.get("if-none-match") == etag:
            with self.server.lock:
                self.server.not_modified.append(self.path)
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        body = page.body.encode() if isinstance(page.body, str) else page.body
        self.send_response(page.status)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in page.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve(host: str = "127.0.0.1") -> Iterator[Site]:
    site = Site(host)
    thread = serve_in_thread(site)
    try:
        yield site
    finally:
        site.stopping.set()
        site.shutdown()
        site.server_close()
        thread.join(10)
