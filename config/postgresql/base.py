"""Django's PostgreSQL backend, with the web pool's checkout check (config/db_pool.py).

Django builds its connection pool with psycopg_pool's own check (a query on every checkout) or
none at all, and takes no other; the web server (``DB_POOL=1``) names this backend so that its
pool looks for a closed socket instead. Everything else is Django's.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base

from config.db_pool import check_pooled_connection


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> Any:
        # Django 5.2's own pool property, but for the check (its pool dict and connection setup).
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        pools: dict[str, Any] = self._connection_pools  # type: ignore[attr-defined]
        if self.alias not in pools:
            from psycopg_pool import ConnectionPool

            kwargs = self.get_connection_params()
            kwargs["autocommit"] = True  # as Django's pool: it sets the mode per connection later
            pool = ConnectionPool(
                kwargs=kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check_pooled_connection,
                **(options if isinstance(options, dict) else {}),
            )
            pools.setdefault(self.alias, pool)
        return pools[self.alias]
