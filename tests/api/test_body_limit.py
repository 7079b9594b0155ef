"""The request body limit holds at the server layer, before Django reads the body or checks
credentials: a real web server (serve_web) serving the project's ASGI application."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.api.conftest import Server, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]

LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def small_limit_server(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory, REQUEST_MAX_BODY_BYTES=str(LIMIT)) as server:
        yield server


def raw_request(
    server: Server, head: str, body_chunks: Iterable[bytes] = ()
) -> tuple[int, dict[str, Any], int]:
    """Send ``head`` and then as much of the body as the server takes; the status, the JSON error
    and how many body bytes were sent before the answer came."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())
        sent = 0
        sock.setblocking(False)
        answer = b""
        for chunk in body_chunks:
            with contextlib.suppress(BlockingIOError):
                answer += sock.recv(65536)
            if answer:
                break
            try:
                sock.sendall(chunk)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        sock.setblocking(True)
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    head_part, _, body = answer.partition(b"\r\n\r\n")
    status = int(head_part.split()[1])
    return status, json.loads(body or b"{}"), sent


def test_an_unauthenticated_one_gib_post_is_refused_without_reading_it(small_limit_server: Server) -> None:
    head = (
        "POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 1073741824\r\n\r\n"
    )
    status, body, sent = raw_request(small_limit_server, head)
    assert status == 413
    assert body["error"]["code"] == "request_too_large"
    assert sent == 0


def test_a_chunked_body_is_cut_off_once_past_the_limit(small_limit_server: Server) -> None:
    """An authenticated upload with no declared length: Django's WSGI handler reads no body
    without one (the upload is refused as empty, 400), and past the limit the server refuses it
    (413); either way it is not read to its end."""
    from documents.services.accounts import user_create_in_tenant

    token = user_create_in_tenant(username="chunked", tenant_slug="chunked")
    head = (
        f"POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
        "Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 65536
    chunks = (b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(16 * 1024))  # up to 1 GiB
    status, _, sent = raw_request(small_limit_server, head, chunks)
    assert status in (400, 413)
    assert sent < 64 * LIMIT  # cut off near the limit (socket buffers hold a few MB), not at 1 GiB


def test_an_unauthenticated_chunked_body_is_refused_before_it_is_read(small_limit_server: Server) -> None:
    head = (
        "POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: multipart/form-data; boundary=x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 65536
    chunks = (b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(16 * 1024))
    status, body, sent = raw_request(small_limit_server, head, chunks)
    assert status == 401
    assert body["error"]["code"] == "not_authenticated"
    assert sent < 64 * LIMIT


def test_a_body_under_the_limit_reaches_django(small_limit_server: Server) -> None:
    status, body, _ = raw_request(
        small_limit_server,
        "POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
        "Content-Type: application/json\r\n\r\n{}",
    )
    assert status == 401
    assert body["error"]["code"] == "not_authenticated"


@override_settings(REQUEST_MAX_BODY_BYTES=LIMIT)
def test_djangos_upload_handler_refuses_an_upload_past_the_limit(client: Client) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from documents.services.accounts import user_create_in_tenant

    token = user_create_in_tenant(username="big", tenant_slug="acme")
    response = client.post(
        "/api/documents/",
        {"file": SimpleUploadedFile("big.txt", b"harbor " * (LIMIT // 3))},
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
