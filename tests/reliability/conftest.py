"""Fixtures of the reliability suite: a private PostgreSQL server the chaos test may restart, and a
Redis database of the suite's own for the scale-out test.

The shared PostgreSQL server (127.0.0.1:5432) is never stopped or restarted here. A private server
needs PostgreSQL's server binaries; without them the test skips, or fails with
``REQUIRE_POSTGRES=1``. Redis is the local server on 127.0.0.1:6379, database
``RELIABILITY_REDIS_DB`` (default 7), and only that database is ever flushed; without Redis the
test skips, or fails with ``REQUIRE_REDIS=1`` (or ``CI=true``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.reliability.helpers import PrivatePostgres, make_private_postgres

REDIS_DB = int(os.environ.get("RELIABILITY_REDIS_DB", "7"))
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A fresh PostgreSQL cluster of this test's own (port, socket directory, data directory)."""
    try:
        server = make_private_postgres()
    except Exception as exc:  # a broken installation: say what went wrong
        server = f"a private PostgreSQL server could not be started: {exc}"
    if isinstance(server, str):
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"REQUIRE_POSTGRES=1 but {server}")
        pytest.skip(server)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.base, ignore_errors=True)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """``redis://127.0.0.1:6379/<own db>``, flushed before and after the test."""
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        reason = f"Redis is not reachable at {REDIS_URL}: {exc}"
        if os.environ.get("REQUIRE_REDIS") == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"REQUIRE_REDIS=1 but {reason}")
        pytest.skip(reason)
    client.flushdb()
    try:
        yield REDIS_URL
    finally:
        client.flushdb()
        client.close()
