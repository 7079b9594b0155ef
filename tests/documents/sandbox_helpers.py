"""Sandbox entry points for the tests: a child that spins, allocates, crashes or answers.

Loaded by the sandbox child through ``DOCUMENTS_SANDBOX_EXTRA_MODULES``; never in the worker.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.timing import hold_for


def spin(seconds: float) -> str:
    """Hold the child's CPU (and its GIL) in pure Python, as a backtracking regex would."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "spun"


def burn() -> None:
    while True:
        pass


def burn_cpu(seconds: float) -> str:
    """Use ``seconds`` of CPU time (not of wall time: the machine may be busy), then answer."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "burnt"


def escape_cpu() -> None:
    """What a subverted child would do against a CPU limit: lift its soft limit as far as it may,
    ignore SIGXCPU, and spin."""
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    with contextlib.suppress(ValueError, OSError):  # the syscall filter refuses: spin anyway
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    burn()


def spin_behind() -> str:
    """Answer at once, leaving a thread that spins on: work outside any call."""
    threading.Thread(target=burn, daemon=True).start()
    return _PROCESS


def allocate(size: int) -> int:
    return len(bytearray(size))


def crash() -> None:
    os.abort()


_PROCESS = os.urandom(8).hex()  # walled in, every child is the same pid of its own namespace


def pid() -> str:
    """Which child process answers."""
    return _PROCESS


def process() -> dict[str, Any]:
    """Which process answers (its pid and its parent's, in its namespace) and of which server
    (``_PROCESS``, drawn once where this module was imported)."""
    return {"pid": os.getpid(), "parent": os.getppid(), "server": _PROCESS}


def wait(seconds: float) -> dict[str, Any]:
    """A call that is still working for ``seconds`` (asleep: no CPU), then says who answered."""
    hold_for(seconds)
    return process()


def end_the_server() -> dict[str, str]:
    """What a subverted call would do to have its document run again and again, on server after
    server: signal its server, the namespace's first process, its group or every process."""
    import errno

    def refused(action: Callable[..., object], *args: int) -> str:
        try:
            action(*args)
        except PermissionError:
            return "refused"
        except OSError as exc:
            return errno.errorcode.get(exc.errno or 0, str(exc))
        return "done"

    targets = {"server": os.getppid(), "first": 1, "group": 0, "every": -1}
    outcome = {name: refused(os.kill, pid, signal.SIGKILL) for name, pid in targets.items()}
    outcome["handle"] = refused(os.pidfd_open, os.getppid())  # a handle left open: the call ends
    return outcome


def leave_behind() -> str:
    """What a subverted child would do to reach the next tenant's call: leave a file in its
    scratch space and a process that waits."""
    with open(os.path.join(tempfile.gettempdir(), "left-behind"), "w") as left:
        left.write("from an earlier call")
    with open("/tmp/left-behind-too", "w") as left:
        left.write("from an earlier call")
    if os.fork() == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    return "left"


def look_around() -> dict[str, Any]:
    """What this call can see of earlier ones: files in its scratch space, and other processes."""
    others = [
        int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (os.getpid(), os.getppid(), 1)
    ]
    return {"files": sorted(set(os.listdir("/tmp")) - _walls_under_scratch()), "processes": others}


def _walls_under_scratch() -> set[str]:
    """The names in /tmp that the walls put there, not a call: where the project or its
    virtualenv lives under /tmp (a fresh checkout), bubblewrap binds it on top of the scratch
    space, in folders of it (``/proc/self/mountinfo``'s mount points)."""
    names = set()
    with open("/proc/self/mountinfo", "rb") as mounts:
        for line in mounts:
            point = os.fsdecode(line.split()[4])
            if point.startswith("/tmp/"):
                names.add(point.removeprefix("/tmp/").split("/")[0])
    return names


def environment() -> list[str]:
    return sorted(os.environ)


def modules(package: str) -> list[str]:
    """The modules of ``package`` this child has imported so far."""
    return sorted(name for name in sys.modules if name.split(".")[0] == package)


SANDBOX_ENTRYPOINTS: dict[str, Any] = {
    "test.spin": spin,
    "test.burn": burn,
    "test.burn_cpu": burn_cpu,
    "test.escape_cpu": escape_cpu,
    "test.spin_behind": spin_behind,
    "test.allocate": allocate,
    "test.crash": crash,
    "test.pid": pid,
    "test.process": process,
    "test.wait": wait,
    "test.end_the_server": end_the_server,
    "test.leave_behind": leave_behind,
    "test.look_around": look_around,
    "test.environment": environment,
    "test.modules": modules,
}
