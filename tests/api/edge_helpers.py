"""Raw-socket clients and process readings for the serving-edge tests (tests/api/test_edge.py,
tests/reliability/test_edge_load.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.api.conftest import Server


def address(server: Server) -> tuple[str, int]:
    host, port = server.base_url.removeprefix("http://").split(":")
    return host, int(port)


def connect(server: Server, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:  # before connecting, so the window is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(10)
    sock.connect(address(server))
    return sock


def request_line(method: str, path: str, headers: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()


def closed_within(
    sock: socket.socket,
    seconds: float,
    *,
    every: float = 0.2,
    action: Callable[[], None] | None = None,
    answers_ok: bool = False,
) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (``action`` run every ``every`` s
    meanwhile). An answer before the close is allowed with ``answers_ok``; otherwise data from
    the server counts as not closed."""
    deadline = time.monotonic() + seconds
    sock.settimeout(every)
    try:
        while time.monotonic() < deadline:
            if action is not None:
                try:
                    action()
                except OSError:
                    return True
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return True
            if not data:
                return True
            if not answers_ok:
                return False
        return False
    finally:
        sock.close()


def worker_pids(server: Server) -> list[int]:
    """The server's processes: the command's and its descendants (granian's workers)."""
    _, proc, _ = server.processes.procs[0]
    found = [proc.pid]
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    i = 0
    while i < len(found):
        found.extend(children.get(found[i], []))
        i += 1
    return found


def rss_kib(pids: list[int]) -> int:
    """Resident memory of ``pids`` together, in KiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def temp_files(directory: Path, pids: list[int]) -> list[str]:
    """Files the server holds in its temporary directory (``TMPDIR``): those listed there, and
    those already unlinked but still open (an anonymous temporary file is unlinked at once; it
    shows as a descriptor of a worker pointing into the directory)."""
    found = [str(p) for p in directory.rglob("*") if p.is_file()]
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith(str(directory)):
                        found.append(target)
    return found


def upload_v1_file(server: Server, token: str, size: int) -> str:
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        answer = client.post(
            "/v1/files",
            headers={"Authorization": f"Bearer {token}"},
            files={"file": ("big.bin", os.urandom(size), "application/octet-stream")},
            data={"purpose": "user_data"},
        )
    assert answer.status_code == 200, answer.text
    file_id: str = answer.json()["id"]
    return file_id
