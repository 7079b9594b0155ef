"""The serving edge under a mixed attack while a normal client polls a job's status: 200
connections that never finish their headers, 10 clients sending headers of many megabytes, 10
sending bodies slowly and 10 downloading a file without reading it, all at once, on loopback,
for a bounded time. The poll stays quick, the workers stay small and no temporary file is left.

The attackers run in a process of their own (forked), so their Python does not share the test's
interpreter lock with the polling client."""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from documents.models import DocumentVersion
from documents.services.accounts import user_create_in_tenant
from tests.api.conftest import Server, serving
from tests.api.edge_helpers import address, rss_kib, temp_files, upload_v1_file, worker_pids

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.reliability]

ATTACK_SECONDS = 20.0
SLOWLORIS = 200
HUGE_HEADERS = 10
SLOW_BODIES = 10
NON_READERS = 10


@pytest.fixture(scope="module")
def server_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("edge-load-tmp")


@pytest.fixture(scope="module")
def edge(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory, server_tmp: Path
) -> Iterator[Server]:
    with serving(
        tmp_path_factory,
        TMPDIR=str(server_tmp),
        WEB_HEADER_SECONDS="3",
        WEB_BODY_IDLE_SECONDS="2",
        WEB_BODY_SECONDS="5",
        WEB_SEND_SECONDS="3",
    ) as server:
        yield server


def _open(host: str, port: int, head: bytes, receive_buffer: int | None = None) -> socket.socket | None:
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(5)
        sock.connect((host, port))
        sock.sendall(head)
        sock.setblocking(False)
        return sock
    except OSError:
        return None


def _slowloris(host: str, port: int, until: float) -> None:
    """SLOWLORIS connections, each sending one more header line a second; reopened when closed."""
    head = b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    socks: list[socket.socket | None] = [_open(host, port, head) for _ in range(SLOWLORIS)]
    while time.monotonic() < until:
        for i, sock in enumerate(socks):
            try:
                if sock is None:
                    raise OSError
                sock.send(b"X-Slow: 1\r\n")
            except OSError:
                if sock is not None:
                    sock.close()
                socks[i] = _open(host, port, head)
        time.sleep(1)
    for sock in socks:
        if sock is not None:
            sock.close()


def _huge_header(host: str, port: int, until: float) -> None:
    while time.monotonic() < until:
        sock = _open(host, port, b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        if sock is None:
            time.sleep(0.2)
            continue
        sock.setblocking(True)
        with contextlib.suppress(OSError):
            for _ in range(20 * 16):  # up to 20 MiB
                sock.sendall(b"a" * 65536)
        sock.close()
        time.sleep(0.2)


def _slow_body(host: str, port: int, until: float, declared: int) -> None:
    head = (
        "POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {declared}\r\n\r\n"
    ).encode()
    while time.monotonic() < until:
        sock = _open(host, port, head)
        if sock is None:
            time.sleep(0.2)
            continue
        with contextlib.suppress(OSError):
            while time.monotonic() < until:
                sock.send(b"y" * 512)
                time.sleep(0.5)
        sock.close()


def _non_reader(host: str, port: int, until: float, path: str, token: str) -> None:
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    while time.monotonic() < until:
        sock = _open(host, port, head, receive_buffer=4096)
        if sock is None:
            time.sleep(0.2)
            continue
        # Never reads; past the send deadline the server drops it: then come back.
        time.sleep(4)
        sock.close()


def _attack(host: str, port: int, until: float, download: str, token: str) -> None:
    threads = [threading.Thread(target=_slowloris, args=(host, port, until))]
    threads += [threading.Thread(target=_huge_header, args=(host, port, until)) for _ in range(HUGE_HEADERS)]
    threads += [
        threading.Thread(target=_slow_body, args=(host, port, until, 500_000 if i % 2 else 30_000_000))
        for i in range(SLOW_BODIES)
    ]
    threads += [
        threading.Thread(target=_non_reader, args=(host, port, until, download, token))
        for _ in range(NON_READERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_status_poll_stays_quick_under_a_mixed_attack(edge: Server, server_tmp: Path) -> None:
    token = user_create_in_tenant(username="poller", tenant_slug="poller")
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=edge.base_url, headers=headers, timeout=10) as client:
        created = client.post("/api/documents/", files={"file": ("a.txt", b"harbor notes\n", "text/plain")})
        assert created.status_code == 201, created.text
        document_id = created.json()["document_id"]
        job_id = DocumentVersion.objects.get(document_id=document_id).job_id
        status_path = f"/api/documents/{document_id}/jobs/{job_id}"
        file_id = upload_v1_file(edge, token, 16 * 1024 * 1024)
        for _ in range(20):  # both workers warm
            with httpx.Client(base_url=edge.base_url, headers=headers, timeout=10) as fresh:
                assert fresh.get(status_path).status_code == 200
        pids = worker_pids(edge)
        idle = rss_kib(pids)

        host, port = address(edge)
        until = time.monotonic() + ATTACK_SECONDS
        attacker = multiprocessing.get_context("fork").Process(
            target=_attack, args=(host, port, until, f"/v1/files/{file_id}/content", token), daemon=True
        )
        attacker.start()
        latencies: list[float] = []
        peak = idle
        try:
            time.sleep(2)  # the attack is under way
            while time.monotonic() < until - 1:
                started = time.monotonic()
                answer = client.get(status_path)
                latencies.append(time.monotonic() - started)
                assert answer.status_code == 200, answer.text
                peak = max(peak, rss_kib(worker_pids(edge)))
                time.sleep(0.05)
        finally:
            attacker.join(timeout=ATTACK_SECONDS + 30)
            if attacker.is_alive():
                attacker.kill()

    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(  # the figures, for bench/README.md
        f"polls {len(latencies)}, p50 {latencies[len(latencies) // 2] * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms; server RSS idle {idle // 1024} MiB, peak {peak // 1024} MiB"
    )
    assert len(latencies) >= 50
    assert p99 <= 0.25, f"p99 {p99 * 1000:.0f} ms over {len(latencies)} polls"
    assert peak <= 1.5 * idle, (idle, peak)
    # Once the attackers' connections are closed, nothing of theirs stays on disk.
    deadline = time.monotonic() + 10
    while temp_files(server_tmp, worker_pids(edge)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert temp_files(server_tmp, worker_pids(edge)) == []
