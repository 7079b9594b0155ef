"""The sandbox's fork server: the interpreter start and imports paid once, a fresh process per call.

Started by :mod:`documents.sandbox.runner` (walled in only) as ``python -m
documents.sandbox.forkserver CPU AS 0 FSIZE NPROC``. It imports what a child needs (the parsers,
the OCR engine's module, the syscall filter) and then, per request on stdin, forks a child from
itself, a process that has never seen a document: the child sets its own limits (address space,
file size, processes, a hard CPU limit of one call's budget), loads the syscall filter, answers
the one request into a pipe and exits. This process never parses; it relays the child's answer
frame, unread, to the worker, or reports how the child ended (``{"died": status}``).

Nothing of one call reaches the next: before answering, it kills every process left in the
sandbox's PID namespace (a child may leave some behind, waiting for the next tenant's file) and
empties the scratch tmpfs and ``/dev/shm``; it exits when it cannot (the worker then starts a new
one). What bubblewrap put there stays (:class:`Skeleton`): a project or virtualenv that lives
under /tmp, as a fresh checkout often does, is bound on top of the scratch tmpfs, read-only, in
folders of the tmpfs; those are never walked into nor removed, and a call that changed them
(renamed, replaced, made unreadable) ends the server too. Either ending is the call's doing, and
the server says so with its exit status (``LEFTOVERS_EXIT``): the worker fails the call for it,
whereas a server that ends otherwise (killed, a crash of its own) is not the call's failure.
SysV IPC and message queues, which outlive processes, are refused by the child's syscall filter.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import re
import resource
import select
import shutil
import signal
import stat
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from documents.sandbox import child

_FRAME = struct.Struct(">I")
# An answer larger than this is refused (the worker would hold it twice): a page batch's text is
# bounded by DOCUMENTS_MAX_TEXT_CHARS long before it.
MAX_ANSWER_BYTES = 512 * 1024**2
_PR_SET_DUMPABLE = 4
_PR_SET_NAME = 15
# What ``ps`` and /proc/<pid>/comm call a forked child and its server.
CALL_NAME = b"sandbox-call"
SERVER_NAME = b"sandbox-server"
# The scratch tmpfs and shared memory: what a call may write, emptied after each call.
_SCRATCH_ROOTS = ("/tmp", "/dev/shm")
# The server's exit status when a call left what it could not remove, or changed the walls'
# folders: it ends for the call's doing (any other ending of it is not the call's).
LEFTOVERS_EXIT = 3


class Leftovers(OSError):
    """What a call left in the scratch space could not be removed, or it changed the walls."""


def _preload() -> None:
    """What every call imports, paid here once: the parsers and what OCR needs."""
    for name in ("documents.engines.parsing", "documents.sandbox.ocr_page", "jobs.errors", "pyseccomp"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _serve_one(request: bytes, limits: tuple[int, int, int, int], out: int, walls: Skeleton) -> int:
    """Fork a child for ``request``; relay its answer; the child's wait status."""
    read_end, write_end = os.pipe()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            os.close(read_end)
            os.close(out)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)  # the worker's requests are the server's, not this child's
            _name(CALL_NAME)
            cpu_seconds, address_space, file_bytes, processes = limits
            child.limit_self(cpu_seconds, address_space, file_bytes, processes, lifetime_calls=1)
            # The call may not end its server (nor the namespace's first process), which would
            # have its call made again on another server, as for a server the OOM killer ended.
            child.filter_syscalls(protected=(1, server))
            answer = json.dumps(child.answer(json.loads(request))).encode()
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(_FRAME.pack(len(answer)) + answer)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    buffer = bytearray()
    status: int | None = None
    too_large = False
    while True:
        ready, _, _ = select.select([read_end], [], [], 0.1)
        if ready:
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            if len(buffer) + len(chunk) > MAX_ANSWER_BYTES + _FRAME.size:
                too_large = True
                os.kill(pid, signal.SIGKILL)
            else:
                buffer += chunk
        elif status is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
                _kill_the_rest()  # a process it left holds the pipe open: end it, then read on
    os.close(read_end)
    if status is None:
        _, status = os.waitpid(pid, 0)
    _kill_the_rest()
    try:
        _empty_scratch(walls)
    except OSError as exc:
        raise Leftovers(str(exc)) from exc
    if too_large:
        reply = {"failure": "resource_limit", "detail": f"the answer was over {MAX_ANSWER_BYTES} bytes"}
        _write(out, json.dumps(reply).encode())
    elif status == 0 and _one_frame(buffer):
        _write_all(out, bytes(buffer))
    else:
        _write(out, json.dumps({"died": os.waitstatus_to_exitcode(status)}).encode())
    return status


def _name(name: bytes) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, ctypes.c_char_p(name))


def _one_frame(buffer: bytearray) -> bool:
    """The child wrote exactly one whole frame (no more, no less): the worker's framing stays
    in step whatever a subverted child wrote."""
    return len(buffer) >= _FRAME.size and len(buffer) == _FRAME.size + _FRAME.unpack_from(buffer)[0]


def _write(out: int, body: bytes) -> None:
    _write_all(out, _FRAME.pack(len(body)) + body)


def _write_all(out: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view) :]


def _kill_the_rest() -> None:
    """Every process of the sandbox's PID namespace but this one and its first process (which
    only reaps): what a child started or left behind. ``kill(-1)`` reaches no process outside the
    namespace, which is why the server runs walled in only."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


@dataclass(frozen=True, slots=True)
class Skeleton:
    """What bubblewrap made in the scratch folders, which stays from call to call: the mount
    points of a project or virtualenv that lives under /tmp (a checkout in /tmp, its ``.venv``),
    the folders that hold them and the symlinks beside them, each with its identity (device,
    inode, mode, owner, a link's target). Everything else there is a call's, and goes."""

    holders: frozenset[str]
    mounts: frozenset[str]
    identities: dict[str, tuple[int, int, int, int, str]]

    def kept(self, path: str) -> bool:
        return path in self.identities


def _identity(path: str) -> tuple[int, int, int, int, str]:
    info = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    return (info.st_dev, info.st_ino, info.st_mode, info.st_uid, target)


def _mount_points() -> set[str]:
    """The mount points under the scratch folders (``/proc/self/mountinfo``'s fifth field, its
    blanks and backslashes written as octal escapes)."""
    found = set()
    for line in Path("/proc/self/mountinfo").read_bytes().splitlines():
        point = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), line.split()[4]))
        if any(point.startswith(root + "/") for root in _SCRATCH_ROOTS):
            found.add(point)
    return found


def skeleton() -> Skeleton:
    """The scratch folders' skeleton, read before any call ran."""
    mounts = _mount_points()
    holders = set()
    for point in mounts:
        for parent in Path(point).parents:
            if str(parent) in _SCRATCH_ROOTS or str(parent) == "/":
                break
            holders.add(str(parent))
    holders -= mounts
    links = {
        entry.path
        for folder in [*_SCRATCH_ROOTS, *holders]
        if os.path.isdir(folder)
        for entry in os.scandir(folder)
        if entry.is_symlink()
    }
    kept = mounts | holders | links
    return Skeleton(frozenset(holders), frozenset(mounts), {path: _identity(path) for path in kept})


def _strangers(folder: str, walls: Skeleton) -> list[str]:
    """What a call left in ``folder``: everything but the skeleton, never looking into a mount."""
    found = []
    for entry in os.scandir(folder):
        if not walls.kept(entry.path):
            found.append(entry.path)
        elif entry.path in walls.holders:
            found += _strangers(entry.path, walls)
    return found


def _empty_scratch(walls: Skeleton) -> None:
    """Remove everything a child wrote (it may have made folders it cannot be walked into), and
    check that the skeleton is as it was: raises OSError when either fails."""
    roots = [folder for folder in _SCRATCH_ROOTS if os.path.isdir(folder)]
    for path in (stranger for folder in roots for stranger in _strangers(folder, walls)):
        entry = Path(path)
        if entry.is_dir() and not entry.is_symlink():
            for inner in [entry, *entry.rglob("*")] if os.access(entry, os.X_OK) else [entry]:
                with contextlib.suppress(OSError):
                    if stat.S_ISDIR(inner.lstat().st_mode):
                        inner.chmod(0o700)
            shutil.rmtree(entry, onerror=_chmod_retry)
        else:
            entry.unlink()
    if any(_strangers(folder, walls) for folder in roots):
        raise OSError("the scratch space could not be emptied")
    if any(_identity(path) != identity for path, identity in walls.identities.items()):
        raise OSError("a call changed the walls' folders under the scratch space")


def _chmod_retry(function: Any, path: str, _: Any) -> None:
    os.chmod(os.path.dirname(path), 0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    function(path)


def main(argv: list[str]) -> int:
    cpu_seconds, address_space, parent_pid = int(argv[1]), int(argv[2]), int(argv[3])
    file_bytes, processes = int(argv[4]), int(argv[5])
    # Walled in only: outside a PID namespace of its own (where it is the second process, after
    # bubblewrap's), kill(-1) would reach every process of the worker's user.
    if parent_pid or os.getpid() != 2:
        return 2
    out = os.dup(1)
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    child.load_extra_entrypoints()
    _preload()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # No other process of its user (a child) may read or write its memory through /proc.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0)
    _name(SERVER_NAME)
    limits = (cpu_seconds, address_space, file_bytes, processes)
    walls = skeleton()
    while True:
        header = child.read_exactly(inp, _FRAME.size)
        if header is None:
            return 0
        body = child.read_exactly(inp, _FRAME.unpack(header)[0])
        if body is None:
            return 0
        try:
            _serve_one(body, limits, out, walls)
        except Leftovers:
            return LEFTOVERS_EXIT  # the worker then starts a new server
        except OSError:
            return 4  # the worker is gone, or no process could be forked: a new server


if __name__ == "__main__":
    sys.exit(main(sys.argv))
