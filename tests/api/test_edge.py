"""The serving edge's limits, against the web server as deployed (``manage.py serve_web``: granian
with the project's settings, config/edge.py), with short limits so that each test waits seconds:
a huge header, a header that never ends, a body that trickles, an idle connection, a download
nobody reads and an unauthenticated upload, each sent over a raw socket as an attacker would."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import Server, serving
from tests.api.edge_helpers import (
    closed_within,
    connect,
    request_line,
    rss_kib,
    temp_files,
    upload_v1_file,
    worker_pids,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

HEADER_SECONDS = 1.0
BODY_IDLE_SECONDS = 1.0
BODY_SECONDS = 3.0
SEND_SECONDS = 2.0


@pytest.fixture(scope="module")
def tmpdir_of_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-tmp")


@pytest.fixture(scope="module")
def edge(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory, tmpdir_of_server: Path
) -> Iterator[Server]:
    with serving(
        tmp_path_factory,
        TMPDIR=str(tmpdir_of_server),
        WEB_HEADER_SECONDS=str(HEADER_SECONDS),
        WEB_BODY_IDLE_SECONDS=str(BODY_IDLE_SECONDS),
        WEB_BODY_SECONDS=str(BODY_SECONDS),
        WEB_SEND_SECONDS=str(SEND_SECONDS),
        WEB_MAX_HEADER_BYTES=str(64 * 1024),
    ) as server:
        yield server


def test_a_header_of_many_megabytes_is_refused_at_once_and_the_workers_stay_small(edge: Server) -> None:
    before = rss_kib(worker_pids(edge))
    started = time.monotonic()
    sock = connect(edge)
    sock.sendall(b"GET /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ")
    sent = 0
    with contextlib.suppress(OSError):
        while sent < 200 * 1024 * 1024:
            sock.sendall(b"a" * 65536)
            sent += 65536
    answer = b""
    with contextlib.suppress(OSError):
        answer = sock.recv(200)
    sock.close()
    assert time.monotonic() - started < 10
    assert sent < 16 * 1024 * 1024, "the server went on reading the header"
    if answer:  # the refusal, when it arrived before the reset
        assert answer.startswith(b"HTTP/1.1 431"), answer
    after = rss_kib(worker_pids(edge))
    assert after - before < 16 * 1024, (before, after)


def test_many_header_fields_are_refused(edge: Server) -> None:
    fields = "".join(f"X-F{i}: v\r\n" for i in range(500))
    sock = connect(edge)
    sock.sendall(f"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}\r\n".encode())
    assert sock.recv(200).startswith(b"HTTP/1.1 431")
    sock.close()


def test_a_header_that_never_ends_is_closed_after_the_header_timeout(edge: Server) -> None:
    sock = connect(edge)
    sock.sendall(b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")

    def trickle() -> None:
        sock.sendall(b"X-Slow: 1\r\n")

    assert closed_within(sock, HEADER_SECONDS + 5, every=0.2, action=trickle)


def test_a_connection_that_sends_nothing_is_closed(edge: Server) -> None:
    sock = connect(edge)
    assert closed_within(sock, HEADER_SECONDS + 5)


def test_an_idle_kept_alive_connection_is_closed(edge: Server) -> None:
    sock = connect(edge)
    sock.sendall(request_line("GET", "/accounts/login/"))
    first = sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    # the rest of that answer may still be on its way (one recv need not hold all of it)
    assert closed_within(sock, HEADER_SECONDS + 5, answers_ok=True)


def test_a_body_that_trickles_is_cut_off(edge: Server) -> None:
    """A small body (read by the server before a thread is taken) sent a byte at a time: refused
    once the whole-body deadline passes, though no gap exceeds the idle deadline."""
    token = user_create_in_tenant(username="trickle", tenant_slug="trickle")
    sock = connect(edge)
    sock.sendall(
        request_line(
            "POST",
            "/api/documents/",
            f"Authorization: Token {token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n",
        )
    )
    started = time.monotonic()
    answer = b""
    sock.settimeout(0.3)
    while not answer and time.monotonic() - started < BODY_SECONDS + 10:
        try:
            sock.sendall(b"x")
            answer = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < BODY_SECONDS + 5


def test_a_large_body_that_stops_is_cut_off(edge: Server) -> None:
    """An authenticated upload (read by the view from the connection) that stops half-way."""
    token = user_create_in_tenant(username="stops", tenant_slug="stops")
    sock = connect(edge)
    sock.sendall(
        request_line(
            "POST",
            "/api/documents/",
            f"Authorization: Token {token}\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 3000000\r\n",
        )
        + b"--x\r\n"
        + b"y" * 100_000
    )
    started = time.monotonic()
    assert closed_within(sock, BODY_IDLE_SECONDS + 8, answers_ok=True)
    assert time.monotonic() - started < BODY_IDLE_SECONDS + 8
    with httpx.Client(base_url=edge.base_url, timeout=5) as fresh:  # the worker still answers
        assert fresh.get("/api/documents/", headers={"Authorization": f"Token {token}"}).status_code == 200


def test_a_download_nobody_reads_is_not_held_in_memory_and_is_cut_off(edge: Server) -> None:
    token = user_create_in_tenant(username="reader", tenant_slug="reader")
    size = 24 * 1024 * 1024
    file_id = upload_v1_file(edge, token, size)
    before = rss_kib(worker_pids(edge))
    readers = []
    for _ in range(4):
        sock = connect(edge, receive_buffer=4096)
        sock.sendall(
            request_line("GET", f"/v1/files/{file_id}/content", f"Authorization: Bearer {token}\r\n")
        )
        readers.append(sock)
    time.sleep(SEND_SECONDS / 2)
    held = rss_kib(worker_pids(edge))
    # Four whole copies would be 96 MiB more; a few pieces per reader are what may be held.
    assert held - before < 24 * 1024, (before, held)
    # Each is dropped SEND_SECONDS after it stops taking pieces, without waiting for the others.
    time.sleep(SEND_SECONDS + 3)
    for sock in readers:
        received = 0
        sock.settimeout(5)
        with contextlib.suppress(OSError):
            while data := sock.recv(1024 * 1024):
                received += len(data)
        sock.close()
        assert received < size, "the slow reader was never cut off"


def test_an_unauthenticated_upload_leaves_no_temporary_file(edge: Server, tmpdir_of_server: Path) -> None:
    """Uploads without credentials to the API, /v1 and the upload page: refused before the body is
    read, and nothing is spooled while the client goes on sending."""
    targets = [
        ("/api/documents/", ""),
        ("/v1/files", ""),
        ("/", "Cookie: csrftoken=abcdefghijklmnopqrstuvwxyzabcdef\r\n"),
    ]
    pids = worker_pids(edge)
    for path, extra in targets:
        sock = connect(edge)
        sock.sendall(
            request_line(
                "POST",
                path,
                f"{extra}Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 8000000\r\n",
            )
        )
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            for _ in range(60):
                sock.send(b"--x\r\n" + b"z" * 65536)
                assert temp_files(tmpdir_of_server, pids) == [], path
                time.sleep(0.01)
        sock.setblocking(True)
        sock.settimeout(5)
        answer = b""
        with contextlib.suppress(OSError):
            answer = sock.recv(65536)
        sock.close()
        assert answer.startswith((b"HTTP/1.1 401", b"HTTP/1.1 403")), (path, answer[:200])
        assert temp_files(tmpdir_of_server, pids) == [], path
