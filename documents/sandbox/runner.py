# long-module: one child's whole life (start, walls, call, failure classification, kill) and the
# worker's pool of one idle child or fork server; split, the rules they share (who kills what,
# when a child is reused) would be read in two places.
"""The parsing sandbox, worker side: untrusted bytes are read in a child process that can be killed.

Its users: the parse stage (a batch of pages per call) and the OCR stage (one page rendered and
recognised per call, :mod:`documents.sandbox.ocr_page`; a call over its time is an ``ocr_timeout``).

A parser stuck in C code holds the GIL: the worker's watchdog could not heartbeat nor see a
cancel, and a regex over one hostile line froze a worker for minutes. So every
reader of untrusted bytes runs in a child (:mod:`documents.sandbox.child`) under CPU-time
and address-space limits, while the worker thread waits on a pipe with a short timeout: between
waits it calls ``check`` (the stage context's safe point), so a cancel, a lost lease or the stage
deadline kills the child at once, and a wall-time limit per call kills it too. A child that dies
or is killed becomes a classified failure: ``parse_timeout`` (wall or CPU time) or
``resource_limit`` (memory, a crash); both count toward the cause's retry limit like any failure.
A fork server (below) that itself ends during a call (the OOM killer, an operator, a crash of its
own) is not the call's doing (:class:`ServerEnded`): the call is made again on a fresh server, up
to ``SERVER_ATTEMPTS`` servers, then fails as ``sandbox_failed``, which the engine retries later.

Each call has its own CPU budget (``DOCUMENTS_SANDBOX_CPU_SECONDS``), counted and enforced here,
by the worker, between waits: the CPU time of the child's process tree since the call began
(:mod:`documents.sandbox.cpu`), whatever it used on earlier calls. The child cannot lift it
(raising its soft limit or ignoring SIGXCPU changes nothing the worker reads); its hard
``RLIMIT_CPU``, set once at its start, covers ``CPU_LIFETIME_CALLS`` budgets and only backs this up.

Walled in, the worker's long-lived process is a fork server (:mod:`documents.sandbox.forkserver`,
``DOCUMENTS_SANDBOX_FORK_SERVER``): it pays the interpreter start and the parsers' imports once,
and each call runs in a process freshly forked from it, which has never seen a document; the
server serves any input file, staged into a folder bound into its walls (one file at a time).
Otherwise, and for OCR's page calls (``WARM_CALLS``: their child keeps the engine loaded), a
child serves the calls of one input file, then the next file gets a fresh child.

Either way a worker keeps one idle process (a fresh one costs an interpreter start and the
parsers' imports: bench/README.md, "The parsing sandbox's cost"), and one that failed, was
killed, served ``DOCUMENTS_SANDBOX_MAX_CALLS`` requests, has less than a budget left before its
hard limit, or used CPU while it was idle (an answer is not the end of its work) is replaced.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from documents.causes import PARSE_TIMEOUT, RESOURCE_LIMIT, SANDBOX_FAILED
from documents.engines import limits as limit_codes
from documents.engines.limits import ParseLimits
from documents.sandbox import cpu, isolation
from documents.sandbox.child import CPU_LIFETIME_CALLS, TEMP_DIR_ENV
from documents.sandbox.forkserver import LEFTOVERS_EXIT
from jobs.errors import StageFailure

_FRAME = struct.Struct(">I")
logger = logging.getLogger(__name__)
_CHILD_ENV = frozenset(
    {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV", "PYTHONHASHSEED"}
    | {"OMP_THREAD_LIMIT", "OMP_NUM_THREADS", "TESSDATA_PREFIX"}  # the OCR engines' own switches
)
_POLL_SECONDS = 0.1
# CPU seconds an idle child may use (it waits on its pipe, which costs nothing): past it, the
# child is still working after its answer and is not given another call.
IDLE_CPU_SECONDS = 0.5
# A child's temp folder: swept by age (documents/apps.py) if its worker died without removing it.
TEMP_PREFIX = "sandbox-"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def temp_leftover_age() -> float:
    """Seconds after which a child's temp folder is a leftover: no call lives that long."""
    return max(settings.DOCUMENTS_SANDBOX_WALL_SECONDS, settings.OCR_TESSERACT_TIMEOUT) + 60


def parse_limits() -> ParseLimits:
    """The configured limits of parsing."""
    return ParseLimits(
        max_pages=settings.DOCUMENTS_MAX_PAGES,
        max_text_chars=settings.DOCUMENTS_MAX_TEXT_CHARS,
        max_html_depth=settings.DOCUMENTS_MAX_HTML_DEPTH,
        max_line_chars=settings.DOCUMENTS_MAX_LINE_CHARS,
    )


class SandboxError(RuntimeError):
    """The child raised something unclassified: a bug, left to the engine (``internal_error``)."""


class ServerEnded(Exception):
    """The fork server itself ended during a call, not the process it forked for the call: killed
    (the OOM killer, an operator) or crashed, which the call's input did nothing to cause. A
    server that ends because of what the call left (``LEFTOVERS_EXIT``) is the call's failure."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the sandbox's fork server ended during the call (exit status {status})")
        self.exit_status = status


# Servers a call is made on when the one before ended during it: a fresh one is another process,
# started again, so a second ending in a row says the worker's machine is in trouble.
SERVER_ATTEMPTS = 2


_warned: set[str] = set()


def _warn_once(walls: isolation.Walls) -> None:
    if walls.reason not in _warned:
        _warned.add(walls.reason)
        logger.warning(
            "The parsing sandbox runs WITHOUT isolation (%s): its child could read the secret key, "
            "the database and every tenant's files. See docs/deployment.md.",
            walls.reason,
        )


def sandbox_layout() -> isolation.Layout:
    """The child's walls as configured."""
    return isolation.Layout(
        uid=settings.DOCUMENTS_SANDBOX_UID,
        scratch_bytes=settings.DOCUMENTS_SANDBOX_SCRATCH_BYTES,
        extra_modules=tuple(settings.DOCUMENTS_SANDBOX_EXTRA_MODULES),
    )


def sandbox_walls() -> isolation.Walls:
    """What this worker's sandbox children get (probed once per process)."""
    return isolation.probe(sandbox_layout())


class Child:
    """One sandbox child process and its pipes, for one input file (``source``) or none.

    A child reads one document's bytes and no other: a child subverted by one tenant's file must
    not keep running to read the next tenant's. Walled in (:mod:`documents.sandbox.isolation`),
    it sees its input as a read-only copy under ``/sandbox/input``.
    """

    def __init__(self, source: str | None = None, *, fork_server: bool = True) -> None:
        self.staged: Path | None = None  # the worker's copy of the input the child sees
        layout = sandbox_layout()
        walls = isolation.probe(layout)
        if not walls.isolated:
            if settings.DOCUMENTS_SANDBOX_REQUIRE_ISOLATION:
                raise SandboxError(f"the parsing sandbox has no isolation here ({walls.reason}), as required")
            _warn_once(walls)
        self.source = source
        self.walled = walls.isolated
        # Outside the walls there is no PID namespace in which the server could end what a
        # forked child left behind: a child per input file, as before.
        self.forked = self.walled and fork_server and settings.DOCUMENTS_SANDBOX_FORK_SERVER
        # Only what an interpreter needs: the worker's environment holds the database URL, the
        # secret key and API keys, none of which a parser of hostile bytes should be able to read.
        env = {key: value for key, value in os.environ.items() if key in _CHILD_ENV}
        # The worker's folder for this child: its input's copy (walled in) or its temp folder
        # (not), removed when the child is killed or retired.
        self.temp_dir = Path(tempfile.gettempdir()) / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        self.inner_source = source
        try:
            self._start(env, layout)
        except BaseException:
            shutil.rmtree(self.temp_dir, ignore_errors=True)  # e.g. the input is gone
            raise

    def _start(self, env: dict[str, str], layout: isolation.Layout) -> None:
        input_dir = None
        if self.walled:
            env["HOME"] = isolation.SCRATCH_DIR
            env["TMPDIR"] = isolation.SCRATCH_DIR
            scratch = f"{isolation.SCRATCH_DIR}/call"
            if self.forked:
                input_dir = str(self.temp_dir / "input")
                Path(input_dir).mkdir(parents=True, mode=0o755)
                self.temp_dir.chmod(0o700)
            elif self.source is not None:
                input_dir = str(self.temp_dir / "input")
                self.inner_source = isolation.stage_input(self.source, Path(input_dir))
                self.staged = Path(input_dir) / Path(self.source).name
        else:
            scratch = str(self.temp_dir)
        env |= {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(_PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
            "PYTHONDONTWRITEBYTECODE": "1",
            "SANDBOX_EXTRA_MODULES": ",".join(settings.DOCUMENTS_SANDBOX_EXTRA_MODULES),
            TEMP_DIR_ENV: scratch,
        }
        limits = [
            f"{settings.DOCUMENTS_SANDBOX_CPU_SECONDS}",
            f"{settings.DOCUMENTS_SANDBOX_MEMORY_BYTES}",
            "0" if self.walled else str(os.getpid()),  # walled in: bubblewrap's --die-with-parent
            f"{settings.DOCUMENTS_SANDBOX_FILE_BYTES}",
            f"{settings.DOCUMENTS_SANDBOX_PROCESSES}",
        ]
        module = "documents.sandbox.forkserver" if self.forked else "documents.sandbox.child"
        argv = [sys.executable, "-m", module, *limits]
        info_read = info_write = -1
        if self.walled:
            info_read, info_write = os.pipe()
            argv = isolation.command(layout, argv, env, input_dir, info_fd=info_write)
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                close_fds=True,
                pass_fds=(info_write,) if self.walled else (),
                start_new_session=True,  # a terminal's Ctrl-C reaches the worker, which ends it
            )
        finally:
            if self.walled:
                os.close(info_write)
        self.owner_pid = os.getpid()
        self.calls = 0
        self.usable = True
        self.cpu_at_rest = 0.0  # the tree's CPU time when it was last made idle
        # The process whose CPU time counts: the interpreter itself, inside bubblewrap's namespaces.
        self.interpreter_pid = self.process.pid
        if self.walled:
            with os.fdopen(info_read, "rb") as info:
                self.interpreter_pid = isolation.interpreter_pid(info.read())
        if self.forked:
            source, self.source = self.source, None
            try:
                self.serve(source)
            except BaseException:
                self.kill()
                raise

    def serve(self, source: str | None) -> None:
        """A fork server's input from now on: the previous one's copy goes first (no call of this
        input's can see the other's), then ``source`` is copied in, read-only."""
        assert self.forked
        if self.staged is not None:
            _remove_tree(self.staged.parent)
            self.staged = None
        self.source = self.inner_source = source
        if source is not None:
            folder = self.temp_dir / "input" / secrets.token_hex(6)
            inner = isolation.stage_file(source, folder)
            self.staged = folder / Path(source).name
            self.inner_source = inner

    def idled(self) -> bool:
        """It used (almost) no CPU since its last answer: a child whose code went on working
        (a thread left spinning) would otherwise do so between calls, outside every budget."""
        return self.tree_cpu() - self.cpu_at_rest <= IDLE_CPU_SECONDS

    def intact(self) -> bool:
        """Its input's copy is still there (the temp sweep may remove one that idled for long)."""
        if self.forked and not (self.temp_dir / "input").is_dir():
            return False  # its input folder, bound into its walls, is gone: a new server
        return self.staged is None or self.staged.exists()

    def alive(self) -> bool:
        """Its process (and, walled in, the interpreter inside bubblewrap) has not ended."""
        if self.process.poll() is not None:
            return False
        if not self.walled or self.interpreter_pid == self.process.pid:
            return True
        try:
            return cpu.state(self.interpreter_pid) not in ("Z", "X")
        except OSError:
            return False

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(
        self,
        name: str,
        args: list[Any],
        *,
        check: Callable[[], None],
        wall_seconds: float,
        timeout_code: str = PARSE_TIMEOUT.code,
    ) -> Any:
        """Run entry point ``name`` in the child; its answer, or a classified :class:`StageFailure`.

        ``check`` runs every 0.1 s while the child works; whatever it raises (cancel, lost lease,
        stage timeout) kills the child and propagates. A call over its wall time, or over
        ``DOCUMENTS_SANDBOX_CPU_SECONDS`` of CPU time (its own, not the child's earlier calls'),
        fails with ``timeout_code`` (``parse_timeout``, or ``ocr_timeout`` for OCR).
        """
        budget = CpuBudget(self, settings.DOCUMENTS_SANDBOX_CPU_SECONDS)
        self.calls += 1
        self.usable = False  # until a complete answer arrives
        assert self.process.stdin is not None and self.process.stdout is not None
        if self.source is not None and self.inner_source != self.source:
            args = [self.inner_source if arg == self.source else arg for arg in args]
            with contextlib.suppress(OSError):
                os.utime(self.temp_dir)  # in use: not a leftover for the temp sweep
        request = json.dumps({"call": name, "args": args}).encode()
        try:
            self.process.stdin.write(_FRAME.pack(len(request)) + request)
            self.process.stdin.flush()
        except OSError:  # the process ended while idle, after it was found alive
            self.kill()
            raise self._ended_failure(timeout_code) from None
        try:
            answer = self._read_answer(
                check, budget, time.monotonic() + wall_seconds, wall_seconds, timeout_code
            )
        except BaseException:
            self.kill()
            raise
        self.usable = True
        if "died" in answer:  # the server's forked child ended without an answer; the server lives
            raise _ended(answer["died"], timeout_code)
        if "ok" in answer:
            return answer["ok"]
        if "failure" in answer:
            if answer["failure"] == limit_codes.RESOURCE_LIMIT and not self.forked:
                self.usable = False  # a MemoryError may leave the child's heap in a poor state
            raise StageFailure(str(answer["failure"]), str(answer.get("detail", "")))
        raise SandboxError(f"{answer.get('error')}: {answer.get('detail')}")

    def cpu_used(self) -> float:
        """CPU seconds the child's interpreter has used: what its hard limit counts."""
        return cpu.process_cpu(self.interpreter_pid)

    def tree_cpu(self) -> float:
        """CPU seconds the child and every process it started have used: what a call counts."""
        return cpu.tree_cpu(self.interpreter_pid)

    def _read_answer(
        self,
        check: Callable[[], None],
        budget: CpuBudget,
        deadline: float,
        wall_seconds: float,
        timeout_code: str,
    ) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        buffer = bytearray()
        needed: int | None = None
        while True:
            check()
            budget.check(timeout_code)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StageFailure(
                    timeout_code, f"the sandbox call took longer than {wall_seconds:.0f}s; child killed"
                )
            ready, _, _ = select.select([fd], [], [], min(_POLL_SECONDS, remaining))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._ended_failure(timeout_code)
            buffer += chunk
            if needed is None and len(buffer) >= _FRAME.size:
                needed = _FRAME.size + _FRAME.unpack_from(buffer)[0]
            if needed is not None and len(buffer) >= needed:
                decoded: dict[str, Any] = json.loads(bytes(buffer[_FRAME.size : needed]))
                return decoded

    def _ended_failure(self, timeout_code: str) -> StageFailure | ServerEnded:
        """Its process ended without an answer: a child's failure is the call's, a fork server's
        is not (the process that ran the call was the server's, and the server reports its end)."""
        code = self.process.wait(timeout=5)
        self._kill_group()  # a process it started (tesseract) may outlive it
        if self.forked and code != LEFTOVERS_EXIT:
            return ServerEnded(code)
        return _ended(code, timeout_code)

    def kill(self) -> None:
        self.usable = False
        self._kill_group()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        _remove_tree(self.temp_dir)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                # A request left in the buffer of a pipe whose reader has ended is flushed on
                # close and fails (BrokenPipeError); the pipe is closed all the same.
                with contextlib.suppress(OSError):
                    stream.close()

    def _kill_group(self) -> None:
        """The child leads its own process group (``start_new_session``): killing the group also
        ends what it started, such as a tesseract process working on a hostile page."""
        if self.owner_pid != os.getpid():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def _ended(code: int, timeout_code: str) -> StageFailure:
    """The failure of a call whose process ended without an answer, by its exit status."""
    # Walled in, bubblewrap reports a child ended by a signal as 128 + the signal.
    if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return StageFailure(timeout_code, f"{CPU_TIME_USED_UP} (its hard limit, SIGXCPU); child ended")
    return StageFailure(RESOURCE_LIMIT.code, f"the sandbox child died (exit status {code})")


def _remove_tree(folder: Path) -> None:
    """Remove ``folder``: an input's copy is read-only (so the child cannot change it)."""
    if folder.exists():
        for inner in [folder, *folder.rglob("*")]:
            if inner.is_dir() and not inner.is_symlink():
                with contextlib.suppress(OSError):
                    inner.chmod(0o700)
    shutil.rmtree(folder, ignore_errors=True)


# What a call refused for its CPU time says, whoever ended it (the worker, or the kernel).
CPU_TIME_USED_UP = "the sandbox call used up its CPU time"


class CpuBudget:
    """One call's CPU budget: the child's process tree may use ``seconds`` from now on (0: no
    budget). Counted by the worker, so nothing the child does lifts it."""

    def __init__(self, child: Child, seconds: float) -> None:
        self.child = child
        self.seconds = seconds
        self.start = child.tree_cpu() if seconds > 0 else 0.0

    def check(self, timeout_code: str) -> None:
        """Raise the call's timeout once its CPU time is over the budget (the caller kills)."""
        if self.seconds <= 0:
            return
        used = self.child.tree_cpu() - self.start
        if used > self.seconds:
            raise StageFailure(
                timeout_code, f"{CPU_TIME_USED_UP}: {used:.1f}s of its {self.seconds:g}s; child killed"
            )


# Entry points whose child keeps what is costly to set up between one input's calls (the OCR
# engine's models, the open PDF: documents/sandbox/ocr_page.py): they run in a child per input
# file even where the fork server runs, since a forked process would set it all up per page.
WARM_CALLS = frozenset({"recognize_page"})

# One idle process of each kind per worker process (a fork server, and a child per input file;
# a q2 worker runs one job at a time; tests run several threads, which then start their own).
_idle: list[Child] = []
_idle_lock = threading.Lock()
atexit.register(lambda: discard_idle())


def _acquire(source: str | None, fork_server: bool) -> Child:
    """The idle process of the kind wanted when it serves the same input or is a fork server, or
    a fresh one. An idle child of another input file is retired (its document is done); an idle
    server waits for the next call that wants one."""
    wanted = fork_server and settings.DOCUMENTS_SANDBOX_FORK_SERVER and sandbox_walls().isolated
    stale: list[Child] = []
    kept: list[Child] = []
    child: Child | None = None
    with _idle_lock:
        while _idle:
            candidate = _idle.pop()
            mine = candidate.owner_pid == os.getpid() and candidate.alive()
            usable = mine and candidate.intact() and candidate.idled()
            fits = usable and (candidate.forked or candidate.source == source)
            if candidate.forked != wanted:
                (kept if fits else stale).append(candidate)
            elif child is None and fits:
                child = candidate
            else:
                stale.append(candidate)
        _idle.extend(kept)
    for old in stale:
        if old.owner_pid == os.getpid():
            old.kill()
    if child is None:
        return Child(source, fork_server=fork_server)
    if child.forked and child.source != source:
        try:
            child.serve(source)
        except BaseException:
            child.kill()
            raise
    return child


def _release(child: Child) -> None:
    if child.owner_pid != os.getpid():
        return  # inherited through a fork: the parent process owns it
    # Its hard CPU limit, fixed at its start, covers CPU_LIFETIME_CALLS full budgets: a child that
    # could not get one more whole budget before it is replaced, so no call is cut short by
    # the CPU earlier calls used.
    spent = child.cpu_used() > settings.DOCUMENTS_SANDBOX_CPU_SECONDS * (CPU_LIFETIME_CALLS - 1)
    if not child.usable or spent or child.calls >= settings.DOCUMENTS_SANDBOX_MAX_CALLS:
        child.kill()
        return
    child.cpu_at_rest = child.tree_cpu()
    with _idle_lock:
        if not any(idle.forked == child.forked for idle in _idle):
            _idle.append(child)
            return
    child.kill()


def sandbox_call(
    name: str,
    *args: Any,
    source: str | os.PathLike[str] | None = None,
    check: Callable[[], None] = lambda: None,
    timeout_code: str = PARSE_TIMEOUT.code,
) -> Any:
    """Run the sandbox entry point ``name`` with ``args`` (JSON values) in a limited child.

    ``source`` is the one file the call reads: the child sees it (and only it), and an argument
    equal to its path is handed over as the path the child sees. A child serves one source.

    Raises :class:`StageFailure` for classified failures (the engine's own, ``timeout_code`` for a
    call over its wall or CPU time, ``resource_limit``) and whatever ``check`` raises; the child
    is killed in both cases. A fork server that ends during the call has the call made again on
    a fresh one; when ``SERVER_ATTEMPTS`` servers ended, the call fails as ``sandbox_failed``.
    """
    statuses: list[int] = []
    for _attempt in range(SERVER_ATTEMPTS):
        child = _acquire(None if source is None else str(source), fork_server=name not in WARM_CALLS)
        try:
            return child.call(
                name,
                list(args),
                check=check,
                wall_seconds=settings.DOCUMENTS_SANDBOX_WALL_SECONDS,
                timeout_code=timeout_code,
            )
        except ServerEnded as ended:
            statuses.append(ended.exit_status)
            logger.warning(
                "The parsing sandbox's fork server (pid %s) ended during a call (exit status %s; "
                "137: killed, by the OOM killer or another process): the call goes to a fresh server",
                child.pid,
                ended.exit_status,
            )
        finally:
            _release(child)
    raise StageFailure(
        SANDBOX_FAILED.code,
        f"the sandbox's fork server ended during the call on {len(statuses)} servers in a row "
        f"(exit statuses {', '.join(map(str, statuses))}): look for the OOM killer in the kernel "
        "log (dmesg) and for whatever kills sandbox-server processes on this worker",
    )


def discard_idle() -> None:
    """End the idle child (settings changed, or the process is shutting down)."""
    with _idle_lock:
        children = list(_idle)
        _idle.clear()
    for child in children:
        if child.owner_pid == os.getpid():
            child.kill()
