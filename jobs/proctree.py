"""Process trees on Linux, read from ``/proc``: what the cluster leader needs to drain its own
processes and to make sure none outlives it.

Also the two Linux process attributes that keep a cluster's tree together: the leader becomes a
*child subreaper* (a process orphaned below it is re-parented to it, not to init, so it is still
found and reaped), and every process it forks asks for a signal when its parent dies (so a worker
whose sentinel vanished, even by SIGKILL, learns of it at once). Elsewhere these are no-ops and
the callers fall back to polling their parent's pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Adopt the orphans of this process's descendants (Linux 3.4+)."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(signum: int = signal.SIGTERM) -> bool:
    """Ask for ``signum`` when the thread that forked this process exits (Linux)."""
    return _prctl(_PR_SET_PDEATHSIG, signum)


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, ppid)`` of ``pid``, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[1])


def parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see (empty without ``/proc``)."""
    found: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                stat = _stat(int(entry.name))
                if stat is not None:
                    found[int(entry.name)] = stat[1]
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first), read in one pass over ``/proc``."""
    by_parent: dict[int, list[int]] = {}
    for child, parent in parents().items():
        by_parent.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (exited, waiting to be reaped)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def reap(pids: list[int]) -> None:
    """Collect the exit status of those of ``pids`` that are this process's exited children."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def stop_on_signals() -> threading.Event:
    """An event set when this process gets SIGINT or SIGTERM (a supervisor's cue to stop)."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def terminate_all(procs: Iterable[subprocess.Popen[Any]], grace: float) -> None:
    """SIGTERM to every child still running, then SIGKILL to those not gone within ``grace`` s."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
