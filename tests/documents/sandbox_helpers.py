"""Sandbox entry points for the tests: a child that spins, allocates, crashes or answers.

Loaded by the sandbox child through ``DOCUMENTS_SANDBOX_EXTRA_MODULES``; never in the worker.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def spin(seconds: float) -> str:
    """Hold the child's CPU (and its GIL) in pure Python, as a backtracking regex would."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "spun"


def burn() -> None:
    while True:
        pass


def allocate(size: int) -> int:
    return len(bytearray(size))


def crash() -> None:
    os.abort()


_PROCESS = os.urandom(8).hex()  # walled in, every child is the same pid of its own namespace


def pid() -> str:
    """Which child process answers."""
    return _PROCESS


def environment() -> list[str]:
    return sorted(os.environ)


def modules(package: str) -> list[str]:
    """The modules of ``package`` this child has imported so far."""
    return sorted(name for name in sys.modules if name.split(".")[0] == package)


SANDBOX_ENTRYPOINTS: dict[str, Any] = {
    "test.spin": spin,
    "test.burn": burn,
    "test.allocate": allocate,
    "test.crash": crash,
    "test.pid": pid,
    "test.environment": environment,
    "test.modules": modules,
}
