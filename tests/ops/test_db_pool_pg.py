"""The web pool's checkout check (config/db_pool.py) on a real PostgreSQL: no query for a healthy
idle connection, and a connection whose backend the server ended is never handed out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from config.db_pool import check_pooled_connection
from tests.conftest import database_url, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def pool_of_one(check: Callable[[Any], None] | None) -> ConnectionPool:
    # In autocommit, as Django configures its pool.
    pool = ConnectionPool(
        database_url(), kwargs={"autocommit": True}, min_size=1, max_size=1, check=check, open=False
    )
    pool.open(wait=True)
    return pool


@pytest.fixture
def pool() -> Iterator[ConnectionPool]:
    pool = pool_of_one(check_pooled_connection)
    yield pool
    pool.close()


def backend_pid(pool: ConnectionPool) -> int:
    with pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def terminate(pid: int) -> None:
    """End backend ``pid`` and wait until it is gone (pg_terminate_backend only signals it): the
    connection then has the server's goodbye or EOF on its socket, as after a restart."""
    with psycopg.connect(database_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        wait_for(
            lambda: admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone() is None,
            timeout=10,
            what=f"backend {pid} to exit",
        )


def test_a_connection_the_server_ended_is_dropped_at_checkout(pool: ConnectionPool) -> None:
    before = backend_pid(pool)
    terminate(before)
    # The next request gets a working connection, not the dead one.
    assert backend_pid(pool) != before


def test_without_the_check_the_dead_connection_reaches_the_request() -> None:
    """What the check prevents: psycopg_pool hands out the dead connection, and the request fails."""
    pool = pool_of_one(None)
    try:
        terminate(backend_pid(pool))
        with pytest.raises(psycopg.OperationalError), pool.connection() as conn:
            conn.execute("SELECT 1")
    finally:
        pool.close()


def test_a_healthy_idle_connection_is_checked_without_a_query(pool: ConnectionPool) -> None:
    """Django's default check runs a query on every checkout; this one reads nothing."""
    with pool.connection() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert pid is not None
    with pool.connection():
        pass
    with psycopg.connect(database_url(), autocommit=True) as admin:
        # The checked connection's last statement is still the SELECT above: no empty query.
        state = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid[0]]).fetchone()
    assert state is not None
    assert state[0] == "SELECT pg_backend_pid()"
