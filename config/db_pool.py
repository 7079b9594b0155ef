"""The health check of a pooled PostgreSQL connection, without a round trip per request.

Django's pool (``CONN_HEALTH_CHECKS``) runs psycopg_pool's ``check_connection`` on every
checkout: an empty query, so every request paid one more round trip than its own queries (about
an eighth of a status request's time in bench/status_endpoint.py). A connection that the server
closed while it sat idle in the pool (a restart, a terminated backend) has something to read on
its socket: the server's goodbye, or end of file. So only then is the real check run, and a dead
connection is still never handed to a request.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg_pool import ConnectionPool


def check_pooled_connection(conn: Any) -> None:
    """Raise (so the pool drops ``conn`` and takes another) if the server has closed it."""
    if conn.closed or conn.broken:
        raise ConnectionError("the pooled connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)  # reads what arrived; raises if the server left
