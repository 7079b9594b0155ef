"""The child side of the parsing sandbox: reads untrusted bytes under resource limits.

Started by :mod:`documents.sandbox.runner` as ``python -m documents.sandbox.child CPU AS PARENT``. It
never imports Django and never touches the database: it gets requests on stdin and answers on its
original stdout, one length-prefixed JSON frame each (JSON, not pickle, so that a child subverted
by a hostile file cannot make the worker run code). Its own limits come first, before any
hostile byte is read: address space (``RLIMIT_AS``), no core files, file size, processes, and a
hard CPU limit for its whole life (``RLIMIT_CPU``), none of which it can raise afterwards. Each
call's CPU budget, and its wall time, are the worker's to count and enforce
(:mod:`documents.sandbox.runner`): this process is the one that might be subverted, so it never
sets a bound on itself that a later call relies on. The worker also kills it on cancel or a
lost lease.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import itertools
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
from collections.abc import Callable
from typing import Any

_FRAME = struct.Struct(">I")


def parse_pages(path: str, kind: str, start: int, count: int, limits: dict[str, int]) -> dict[str, Any]:
    """Up to ``count`` pages from page ``start + 1`` on, and the document's page total."""
    from documents.engines import parsing
    from documents.engines.limits import ParseLimits

    parse_limits = ParseLimits(**limits)
    total = parsing.page_count(path, kind)
    parse_limits.check_page_count(total)
    pages = itertools.islice(parsing.parse(path, kind, start_page=start, limits=parse_limits), count)
    return {
        "total": total,
        "pages": [
            {
                "number": page.number,
                "text": page.text,
                "needs_ocr": page.needs_ocr,
                "blocks": [[block.kind, block.text, block.level] for block in page.blocks],
            }
            for page in pages
        ],
    }


def recognize_page(path: str, kind: str, number: int, options: dict[str, Any]) -> dict[str, Any]:
    """Page ``number`` rendered and recognised by OCR (:mod:`documents.sandbox.ocr_page`)."""
    from documents.sandbox import ocr_page

    return ocr_page.recognize_page(path, kind, number, options)


ENTRYPOINTS: dict[str, Callable[..., Any]] = {"parse_pages": parse_pages, "recognize_page": recognize_page}
# Deployments and tests may name modules whose ``SANDBOX_ENTRYPOINTS`` add callables.
EXTRA_MODULES_ENV = "SANDBOX_EXTRA_MODULES"


def _die_with_parent(parent_pid: int) -> None:
    """Linux: the kernel kills this child when its worker dies (SIGKILL, the OOM killer), even in
    the middle of a parse; without it the child would spin on until its CPU budget ran out."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the closed pipe ends the child at its next read
    if os.getppid() != parent_pid:  # the worker died before prctl took effect
        os._exit(0)


_PR_SET_PDEATHSIG = 1


# The child's hard CPU limit, set once at its start, covers this many full per-call budgets; the
# worker enforces each call's budget itself and replaces a child that could not get one more.
# The hard limit can only be lowered (short of root with CAP_SYS_RESOURCE), and the syscall
# filter refuses any change of a limit, so a subverted child spins at most that long in all,
# idle or not, even where the worker could not read its CPU time.
CPU_LIFETIME_CALLS = 4


def limit_self(
    cpu_seconds: int,
    address_space: int,
    file_bytes: int,
    processes: int,
    lifetime_calls: int = CPU_LIFETIME_CALLS,
) -> None:
    """Limits the child cannot raise again: every hard limit is set, the others to their soft
    value; the CPU one to a lifetime budget (see ``CPU_LIFETIME_CALLS``; one call's for a child
    forked by :mod:`documents.sandbox.forkserver`)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if address_space > 0:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if file_bytes > 0:  # no file written bigger (the write fails with EFBIG: Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    if processes > 0:  # processes and threads of the child's user (not enforced for root)
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    if cpu_seconds > 0:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        lifetime = int(usage.ru_utime + usage.ru_stime) + 2 + cpu_seconds * lifetime_calls
        # SIGXCPU a second before the kill: the worker reports it as the call's CPU time.
        resource.setrlimit(resource.RLIMIT_CPU, (lifetime - 1, lifetime))


# Calls a parser or an OCR engine never makes, and an attacker's code would: inspecting or
# changing other processes, new namespaces (a way out of the walls), kernel attack surface,
# changing its own limits (set before the filter; ``prlimit64`` only to read one, below), and
# SysV IPC and message queues, which outlive the process (a forked child's next sibling would
# find them).
_DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount", "open_tree",
    "fsopen", "fsmount", "fsconfig", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "swapon", "swapoff", "reboot", "acct",
    "quotactl", "syslog", "settimeofday", "clock_settime", "adjtimex", "mknod", "mknodat",
    "setrlimit", "shmget", "msgget", "semget", "mq_open",
)  # fmt: skip
_NEW_NAMESPACES = (0x10000000, 0x00020000, 0x40000000)  # CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET
_AF_UNIX = 1


# The libraries pyseccomp loads, by soname: its module looks each up with ctypes.util.find_library,
# which starts ``ldconfig -p`` to read the loader's cache (two processes more in every child, a
# few milliseconds of CPU and tens of wall time on a loaded machine); the loader itself finds a
# soname in that cache. A machine with another soname gets the search as before.
_SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}


def _import_pyseccomp() -> Any:
    import ctypes
    import ctypes.util

    search = ctypes.util.find_library

    def by_soname(name: str) -> str | None:
        soname = _SONAMES.get(name)
        if soname is None:
            return search(name)
        try:
            ctypes.CDLL(soname)
        except OSError:
            return search(name)
        return soname

    ctypes.util.find_library = by_soname  # the child has one thread yet: nobody else looks
    try:
        import pyseccomp
    finally:
        ctypes.util.find_library = search
    return pyseccomp


# Calls that send a signal to the process their first argument names (``pidfd_open`` makes a
# handle to send one through); ``pidfd_send_signal`` takes a handle, even one made of /proc/PID.
_SIGNALLING = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
_PID_MASK = 0xFFFFFFFF  # a pid is a C int: its low 32 bits, whatever the register's upper ones hold


def filter_syscalls(protected: tuple[int, ...] = ()) -> bool:
    """A seccomp filter (libseccomp through ``pyseccomp``): the calls above fail with EPERM,
    and so does every socket but a Unix one (no network even where a network namespace is
    missing), and so does every change of a resource limit (``prlimit64`` with a new value: the C
    library reads limits through it too). The ``protected`` processes (a forked call's server)
    may not be sent a signal, nor their process group, nor every process at once (``kill(-1)``).
    Returns False where the machine has no libseccomp: the other walls still hold."""
    try:
        seccomp = _import_pyseccomp()

        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        denied = seccomp.ERRNO(errno.EPERM)
        for name in _DENIED:
            with contextlib.suppress(RuntimeError, ValueError, OSError):  # not on this kernel
                rules.add_rule(denied, name)
        rules.add_rule(denied, "socket", seccomp.Arg(0, seccomp.NE, _AF_UNIX))
        rules.add_rule(denied, "prlimit64", seccomp.Arg(2, seccomp.NE, 0))
        for flag in _NEW_NAMESPACES:
            rules.add_rule(denied, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        # clone3 hides its flags in memory a filter cannot read: "not implemented" makes the C
        # library fall back to clone, whose flags the rule above sees.
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        if protected:
            with contextlib.suppress(RuntimeError, ValueError, OSError):  # not on this kernel
                rules.add_rule(denied, "pidfd_send_signal")
            for name in _SIGNALLING:
                for target in sorted({0, -1, *protected, *(-pid for pid in protected)}):
                    first = seccomp.Arg(0, seccomp.MASKED_EQ, _PID_MASK, target & _PID_MASK)
                    with contextlib.suppress(RuntimeError, ValueError, OSError):
                        rules.add_rule(denied, name, first)
        rules.load()
    except (ImportError, OSError, RuntimeError, ValueError):
        return False
    return True


def read_exactly(stream: Any, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


# The child's own temp folder, named by the worker (which removes it when it kills the child):
# engines that write temp files (pytesseract: the page image and tesseract's output) write there,
# so a child killed mid-page leaves nothing behind in the shared temp directory.
TEMP_DIR_ENV = "SANDBOX_TEMP_DIR"


def answer(request: dict[str, Any]) -> dict[str, Any]:
    from jobs.errors import StageFailure

    function = ENTRYPOINTS.get(request["call"])
    if function is None:
        return {"error": "UnknownCall", "detail": f"no sandbox entry point {request['call']!r}"}
    folder = os.environ.get(TEMP_DIR_ENV, "")
    try:
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            tempfile.tempdir = folder
        return {"ok": function(*request.get("args", []))}
    except StageFailure as failure:
        return {"failure": failure.cause, "detail": str(failure)}
    except (MemoryError, RecursionError) as exc:
        return {"failure": "resource_limit", "detail": f"{type(exc).__name__}: {exc}"[:2000]}
    except Exception as exc:
        return {"error": type(exc).__name__, "detail": str(exc)[:2000]}
    finally:
        if folder:  # between calls there is no folder: an idle child holds no temp space
            tempfile.tempdir = None
            shutil.rmtree(folder, ignore_errors=True)


def load_extra_entrypoints() -> None:
    for name in filter(None, os.environ.get(EXTRA_MODULES_ENV, "").split(",")):
        ENTRYPOINTS.update(getattr(importlib.import_module(name), "SANDBOX_ENTRYPOINTS", {}))


def main(argv: list[str]) -> int:
    cpu_seconds, address_space, parent_pid = int(argv[1]), int(argv[2]), int(argv[3])
    file_bytes, processes = (int(argv[4]), int(argv[5])) if len(argv) > 5 else (0, 0)
    if parent_pid:  # 0: walled in, where bubblewrap ends the namespace with its worker
        _die_with_parent(parent_pid)
    # The protocol keeps the real stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    load_extra_entrypoints()
    limit_self(cpu_seconds, address_space, file_bytes, processes)
    filter_syscalls()
    while True:
        header = read_exactly(inp, _FRAME.size)
        if header is None:
            return 0  # the worker closed the pipe (or died): nothing more to do
        body = read_exactly(inp, _FRAME.unpack(header)[0])
        if body is None:
            return 0
        import json

        reply = json.dumps(answer(json.loads(body))).encode()
        out.write(_FRAME.pack(len(reply)) + reply)
        out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
