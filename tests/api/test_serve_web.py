"""The web server as deployed (``manage.py serve_web``, config/dispatch.py), run for real: sync
views on the WSGI handler's threads with their bodies read first, async views on the ASGI
handler, several granian workers on one port, restarted when they die."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from config.dispatch import is_async_view
from documents.services.accounts import user_create_in_tenant
from jobs import proctree
from tests.api.conftest import Server, free_port, serving
from tests.conftest import Processes, child_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


def test_the_event_stream_is_the_async_view_and_the_api_is_not() -> None:
    job = "/api/documents/d/jobs/j"
    assert is_async_view(f"{job}/events")
    assert not is_async_view(job)
    assert not is_async_view("/api/documents/")
    assert not is_async_view("/no/such/page")  # Django's 404 comes from the sync handler


@pytest.fixture(scope="module")
def one_thread_server(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One sync thread per worker: whatever holds it holds every sync request of that worker."""
    with serving(tmp_path_factory, WEB_THREADS="1") as server:
        yield server


def test_a_slow_upload_holds_no_sync_thread(one_thread_server: Server) -> None:
    """Uploads that trickle in (one to every worker, more than the threads) leave the API
    answering: their bodies are read on the event loop, and a thread is taken only once a whole
    body is there."""
    token = user_create_in_tenant(username="slow", tenant_slug="slow")
    host, port = one_thread_server.base_url.removeprefix("http://").split(":")
    declared = 100_000
    slow = []
    for _ in range(6):  # both workers get some: the kernel spreads connections over the sockets
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(
            (
                "POST /api/documents/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Token {token}\r\n"
                "Content-Type: multipart/form-data; boundary=x\r\n"
                f"Content-Length: {declared}\r\n\r\n--x\r\n"
            ).encode()
        )
        slow.append(sock)
    try:
        with one_thread_server.client(token, timeout=5) as client:
            for _ in range(10):  # fresh connections, so both workers are asked
                with httpx.Client(base_url=one_thread_server.base_url, timeout=5) as fresh:
                    assert (
                        fresh.get("/api/documents/", headers={"Authorization": f"Token {token}"}).status_code
                        == 200
                    )
            assert client.get("/api/documents/").status_code == 200
    finally:
        for sock in slow:
            sock.close()


def test_an_upload_read_ahead_is_stored_whole(server: Server) -> None:
    """The body the sync handler gets is the body the client sent (spilled to a file past 1 MiB)."""
    token = user_create_in_tenant(username="whole", tenant_slug="whole")
    text = b"".join(b"line %06d of a long notes file about harbors and falcons\n" % i for i in range(40_000))
    assert len(text) > 2 * 1024 * 1024
    with server.client(token) as client:
        answer = client.post("/api/documents/", files={"file": ("long.txt", text, "text/plain")})
        assert answer.status_code == 201, answer.text
        document_id = answer.json()["document_id"]
        from documents.models import DocumentVersion

        version = DocumentVersion.objects.get(document_id=document_id)
        with version.file.open("rb") as stored:
            assert stored.read() == text


def _established(port: int, pid: int) -> int:
    """How many established TCP connections to ``port`` process ``pid`` holds (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        found = re.fullmatch(r"socket:\[(\d+)\]", target)
        if found:
            inodes.add(found.group(1))
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def _workers(leader: int) -> list[int]:
    return sorted(pid for pid, parent in proctree.parents().items() if parent == leader)


@dataclass
class TwoWorkers:
    leader: subprocess.Popen[bytes]
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def two_workers(tmp_path: Path) -> Iterator[TwoWorkers]:
    """``serve_web --workers 2`` on a free port, both workers up and the server answering."""
    processes = Processes(tmp_path)
    port = free_port()
    args = ["serve_web", "--port", str(port), "--workers", "2", "--graceful-seconds", "1"]
    try:
        web = TwoWorkers(processes.manage("web", args, child_env()), port)
        wait_for(lambda: len(_workers(web.leader.pid)) == 2, timeout=30, what="two workers")
        wait_for(lambda: _answers(web.base), timeout=30, what="the server to answer")
        yield web
    finally:
        processes.stop_all()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads connections from Linux's /proc")
def test_kept_alive_connections_are_spread_over_the_workers(two_workers: TwoWorkers) -> None:
    """A burst of kept-alive connections is shared by the workers, not taken by the first one
    that wakes (granian's workers each listen with SO_REUSEPORT, and the kernel spreads them)."""
    clients = [httpx.Client(base_url=two_workers.base, timeout=10) for _ in range(40)]
    try:
        for client in clients:  # each keeps its connection open after its request
            assert client.get("/accounts/login/").status_code == 200
        counts = [_established(two_workers.port, pid) for pid in _workers(two_workers.leader.pid)]
    finally:
        for client in clients:
            client.close()
    assert sum(counts) == 40, counts
    # Binomial(40, 1/2): below 6 on one side has odds of about 1 in 10^6.
    assert min(counts) >= 6, counts


def test_a_dead_worker_is_started_again_and_sigterm_stops_them_all(two_workers: TwoWorkers) -> None:
    leader = two_workers.leader
    first = _workers(leader.pid)
    os.kill(first[0], signal.SIGKILL)
    wait_for(
        lambda: len(_workers(leader.pid)) == 2 and first[0] not in _workers(leader.pid),
        timeout=30,
        what="the killed worker to be started again",
    )
    wait_for(
        lambda: all(_answers(two_workers.base) for _ in range(20)), timeout=30, what="every socket to answer"
    )
    workers = _workers(leader.pid)
    leader.send_signal(signal.SIGTERM)
    assert leader.wait(timeout=30) == 0
    for pid in workers:  # the leader waited for them
        assert not Path(f"/proc/{pid}").exists()


def _answers(base: str) -> bool:
    try:
        with httpx.Client(base_url=base, timeout=2) as client:  # a new connection each time
            return client.get("/accounts/login/").status_code == 200
    except httpx.HTTPError:
        return False
