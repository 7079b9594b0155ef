"""A parser that attacks its sandbox instead of parsing: what a file exploiting a memory bug in
PDFium, libxml2 or Pillow would do once it runs code in the sandbox child.

The child loads this module through ``DOCUMENTS_SANDBOX_EXTRA_MODULES`` (importing it registers
the ``hostile`` kind there, never in the worker). A ``hostile`` file is JSON naming the attack and
its target; the parser tries it and reports the outcome as the page's text, which the test reads.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import socket
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

from documents.engines.limits import ParseLimits
from documents.parsers import FileKind, Parser, register
from documents.parsers.pages import Block, ParsedDocument, ParsedPage, StrPath

HOSTILE = "hostile"


def _failed(exc: BaseException) -> dict[str, Any]:
    return {"done": False, "error": type(exc).__name__, "detail": str(exc)[:300]}


def read(target: str) -> dict[str, Any]:
    try:
        return {"done": True, "data": Path(target).read_bytes()[:200].decode(errors="replace")}
    except OSError as exc:
        return _failed(exc)


def database(target: str) -> dict[str, Any]:
    try:
        connection = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        rows = connection.execute("SELECT name FROM sqlite_master").fetchall()
        return {"done": True, "data": [row[0] for row in rows]}
    except sqlite3.Error as exc:
        return _failed(exc)


def connect(target: str) -> dict[str, Any]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return {"done": True}
    except OSError as exc:
        return _failed(exc)


def open_socket(target: str) -> dict[str, Any]:
    """Any network socket at all (UDP needs no listener to be created and "sent")."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"x", (target, 53))
        return {"done": True}
    except OSError as exc:
        return _failed(exc)


def fork_bomb(target: str) -> dict[str, Any]:
    """Fork up to ``target`` processes (each sleeps, then exits); how many were made."""
    made: list[int] = []
    outcome: dict[str, Any] = {"done": True}
    for _ in range(int(target)):
        try:
            pid = os.fork()
        except OSError as exc:
            outcome = _failed(exc)
            break
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        made.append(pid)
    for pid in made:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return {**outcome, "made": len(made)}


def huge_file(target: str) -> dict[str, Any]:
    """Write ``target`` bytes into one file of the scratch space; how many were written."""
    written = 0
    block = b"\0" * (1024 * 1024)
    try:
        with tempfile.TemporaryFile() as out:
            while written < int(target):
                written += out.write(block)
                out.flush()
        return {"done": True, "made": written}
    except OSError as exc:
        return {**_failed(exc), "made": written}


def raise_cpu(target: str) -> dict[str, Any]:
    """Lift the CPU limit (soft and hard) to unlimited, as the old sandbox allowed."""
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        return {"done": True, "limits": resource.getrlimit(resource.RLIMIT_CPU)}
    except (OSError, ValueError) as exc:
        return {**_failed(exc), "limits": resource.getrlimit(resource.RLIMIT_CPU)}


def raise_soft_cpu(target: str) -> dict[str, Any]:
    """Lift the soft CPU limit up to the hard one: within the rules of resource limits, and so
    refused only by the syscall filter."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        return {"done": True, "limits": resource.getrlimit(resource.RLIMIT_CPU)}
    except (OSError, ValueError) as exc:
        return {**_failed(exc), "limits": resource.getrlimit(resource.RLIMIT_CPU)}


def new_namespace(target: str) -> dict[str, Any]:
    """A user namespace of its own (root in there: the first step of many escapes)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER
        return {"done": True}
    return {"done": False, "error": errno.errorcode[ctypes.get_errno()]}


def settings_loaded(target: str) -> dict[str, Any]:
    """Whether the child's parsing and OCR code pulled in Django (and so could read settings)."""
    import_module("documents.sandbox.ocr_page")
    import_module("documents.engines.parsing")
    return {"done": "django" in sys.modules, "environment": sorted(os.environ)}


ATTACKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "read": read,
    "database": database,
    "connect": connect,
    "socket": open_socket,
    "fork_bomb": fork_bomb,
    "huge_file": huge_file,
    "raise_cpu": raise_cpu,
    "raise_soft_cpu": raise_soft_cpu,
    "new_namespace": new_namespace,
    "settings_loaded": settings_loaded,
}


def _pages(path: StrPath, kind: str, start: int, limits: ParseLimits) -> Iterator[ParsedPage]:
    order = json.loads(Path(path).read_text())
    outcome = ATTACKS[order["attack"]](str(order.get("target", "")))
    yield ParsedPage.from_blocks(1, [Block("paragraph", json.dumps(outcome))])


PARSER = register(
    Parser(
        kinds=(FileKind(HOSTILE, "application/x-hostile", (".hostile",)),),
        pages=_pages,
        document=lambda path, kind: ParsedDocument(kind, None, list(_pages(path, kind, 0, ParseLimits()))),
        page_count=lambda path, kind: 1,
    )
)
SANDBOX_ENTRYPOINTS: dict[str, Any] = {}
