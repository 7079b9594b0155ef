"""The CPU time of a sandbox child's processes, read by the worker from ``/proc``.

The worker bounds each call's CPU time from outside (:mod:`documents.sandbox.runner`): a child
can raise its own soft limit or ignore SIGXCPU, but it cannot change what the kernel reports of
it. A call's CPU time is that of the child's whole process tree (the interpreter and what it
started, such as a tesseract process), so a program run for a page counts toward the page.

Linux only; elsewhere (or for a process already gone) the readings are 0 and the child's hard
``RLIMIT_CPU`` is the only bound.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A fork bomb stops at RLIMIT_NPROC; past this many processes the rest are not counted.
_MAX_PROCESSES = 4096


def _stat(pid: int) -> list[str]:
    # The fields after the command name, which may itself hold spaces and ")".
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def state(pid: int) -> str:
    """Process ``pid``'s state letter (``Z``: ended, not yet reaped); OSError when it is gone."""
    return _stat(pid)[0]


def process_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` itself has used (its threads included; 0 when unreadable)."""
    try:
        fields = _stat(pid)
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found.extend(int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds used by ``pid`` and every process under it: each live (or not yet reaped)
    process's own time and the time of the children it has reaped."""
    if pid <= 0:
        return 0.0
    total = 0.0
    pending, seen = [pid], set[int]()
    while pending and len(seen) < _MAX_PROCESSES:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            fields = _stat(current)
            total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICKS  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue  # gone: its time is now in its parent's reaped-children figures
        pending.extend(_children(current))
    return total
