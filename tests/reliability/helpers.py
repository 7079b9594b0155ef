"""Tools of the reliability suite: process trees of real q2 clusters, a private PostgreSQL server
that a test may restart, pointing this process at another database, and retrying through an
outage.

Nothing here touches the shared PostgreSQL server on 5432 or any process this suite did not start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connection, connections

from tests.conftest import ROOT
from tests.timing import hold_for

T = TypeVar("T")

# --- process trees -----------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's list), or [] when it is gone."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def sandbox_readers(pid: int) -> list[int]:
    """The processes under ``pid`` reading a document in the sandbox: a child per input file, or
    a fork server's forked child (walled in, bubblewrap and setpriv carry the same command line
    as the child they start; the server itself reads nothing)."""
    found = []
    for process in descendants(pid):
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{process}/comm").read_text().strip()
            launcher = name in ("bwrap", "setpriv")
            started = b"documents.sandbox.child" in Path(f"/proc/{process}/cmdline").read_bytes()
            if name == "sandbox-call" or (started and not launcher):
                found.append(process)
    return found


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def worker_pid(worker_name: str) -> int:
    """The pid in a job's ``worker_name`` (``host:pid``)."""
    return int(worker_name.rsplit(":", 1)[1])


def busy_workers(cluster_pids: list[int]) -> dict[int, Any]:
    """q2 worker processes of these clusters that hold a running stage now: pid -> job id.

    Only processes in these clusters' trees qualify, so nothing else on the machine is touched.
    """
    from jobs.models import LEASED, StageRun

    ours = {pid for root in cluster_pids for pid in descendants(root)}
    running = StageRun.objects.filter(outcome=StageRun.Outcome.RUNNING, job__status__in=LEASED)
    found = {worker_pid(name): job_id for name, job_id in running.values_list("worker_name", "job_id")}
    return {pid: job_id for pid, job_id in found.items() if pid in ours and alive(pid)}


# --- running manage.py -------------------------------------------------------------------------


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check_jobs(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``manage.py check_jobs`` against the database in ``env``."""
    return manage(env, "check_jobs", timeout=120)


# --- a private PostgreSQL server ---------------------------------------------------------------


def postgres_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's binaries (Debian layout), if any."""
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PrivatePostgres:
    """A throwaway PostgreSQL cluster owned by the ``postgres`` user, on its own port and socket
    directory. Only the test that made it stops or restarts it."""

    bin_dir: Path
    base: Path
    port: int = field(default_factory=free_port)
    database: str = "reliability"
    restarts: int = 0
    options: str = ""  # extra server options (-c name=value ...), applied at the next start

    @property
    def data(self) -> Path:
        return self.base / "pg"

    @property
    def log(self) -> Path:
        return self.base / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def _as_postgres(self, *args: str, timeout: float = 60) -> None:
        result = subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {result.stdout}{result.stderr}")

    def _pg_ctl(self, *args: str) -> None:
        self._as_postgres(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", *args)

    def init(self) -> None:
        self._as_postgres(
            str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"
        )
        self.start()
        self._as_postgres(
            str(self.bin_dir / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            self.database,
        )

    def start(self) -> None:
        # fsync off: this server holds nothing worth surviving a power cut, and the machine is
        # small. An immediate shutdown (a crash, for PostgreSQL) still recovers from its WAL.
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
            f" {self.options}"
        ).strip()
        self._pg_ctl("-o", options, "-l", str(self.log), "start")

    def restart(self) -> float:
        """Crash-stop (``-m immediate``: every connection dies at once) and start again; seconds down."""
        started = time.monotonic()
        self._pg_ctl("-m", "immediate", "stop")
        self.start()
        self.restarts += 1
        return time.monotonic() - started

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._pg_ctl("-m", "immediate", "stop")


def make_private_postgres() -> PrivatePostgres | str:
    """A running private server, or the reason why none can be made here."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        return "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
    if shutil.which("runuser") is None:
        return "runuser is missing (initdb refuses to run as root)"
    try:
        import pwd

        owner = pwd.getpwnam("postgres")
    except KeyError:
        return "there is no postgres user to own a private cluster"
    base = Path(tempfile.mkdtemp(prefix="reliability-pg-"))
    os.chown(base, owner.pw_uid, owner.pw_gid)
    server = PrivatePostgres(bin_dir=bin_dir, base=base)
    try:
        server.init()
    except Exception:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
        raise
    return server


# --- this process on another database ----------------------------------------------------------


@contextlib.contextmanager
def use_database(url: str) -> Iterator[None]:
    """Point this process's default connection at ``url`` (a PostgreSQL URL) for the block."""
    import dj_database_url

    wrapper = connections["default"]
    saved = dict(wrapper.settings_dict)
    parsed = dj_database_url.parse(url)
    wrapper.close()
    for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT"):
        wrapper.settings_dict[key] = parsed[key]
    try:
        yield
    finally:
        wrapper.close()
        wrapper.settings_dict.clear()
        wrapper.settings_dict.update(saved)


def retrying(action: Callable[[], T], *, timeout: float = 60) -> T:
    """Run ``action``, reconnecting and trying again while the database is unreachable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            connection.close()
            hold_for(0.2)  # the database is restarting: poll again in a moment


def wait_until(
    predicate: Callable[[], Any], *, timeout: float, interval: float = 0.25, what: str = ""
) -> Any:
    """Like ``tests.conftest.wait_for``, but rides out database outages."""
    deadline = time.monotonic() + timeout
    while True:
        value = retrying(predicate, timeout=max(1.0, deadline - time.monotonic()))
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
        hold_for(interval)  # the poll interval of this deadline-bound wait
