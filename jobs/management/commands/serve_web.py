"""``manage.py serve_web``: the web server, granian with the project's limits.

granian (a Rust HTTP server, hyper underneath) runs ``config.asgi:application`` in ``--workers``
processes. Its own documented settings bound everything that happens before the application is
called (docs/limits.md, "The web server"):

- the request line and headers together at most ``WEB_MAX_HEADER_BYTES`` (hyper's read buffer;
  larger heads get ``431`` at once, without the rest being read), at most 100 header fields;
- the head within ``WEB_HEADER_SECONDS``, counted from the moment the server waits for it: a
  client that never finishes its headers, or a kept-alive connection with no next request, is
  closed then;
- at most ``WEB_MAX_REQUESTS`` connections served at once per worker (granian's backpressure);
  more wait in the listen backlog;
- HTTP/1.1 only (no cleartext HTTP/2, whose header limits are a different set).

The request body and the answer are bounded by config/edge.py. Workers that die are started
again; SIGTERM or SIGINT stops them, letting requests in flight finish for ``--graceful-seconds``.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings
from granian.server import Server

APPLICATION = "config.asgi:application"


def granian_options(*, workers: int, graceful_seconds: int) -> dict[str, Any]:
    """The server's settings from the project's (also what the tests start)."""
    return {
        "interface": Interfaces.ASGINL,  # Django needs no lifespan events
        "http": HTTPModes.http1,
        "loop": Loops.uvloop,
        "workers": workers,
        "backpressure": settings.WEB_MAX_REQUESTS,
        "http1_settings": HTTP1Settings(
            header_read_timeout=max(1, round(settings.WEB_HEADER_SECONDS * 1000)),  # in ms
            max_buffer_size=max(8192, settings.WEB_MAX_HEADER_BYTES),
        ),
        "websockets": False,
        "respawn_failed_workers": True,
        "respawn_interval": 0.5,
        "workers_kill_timeout": graceful_seconds,
        "log_access": False,
    }


class Command(BaseCommand):
    help = "Serve the web application with granian, N worker processes on one port."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--workers",
            type=int,
            default=int(os.environ.get("WEB_WORKERS", "2")),
            help="Server processes (WEB_WORKERS, default 2; one per core on a web machine, or more "
            "where requests wait on the database).",
        )
        parser.add_argument(
            "--graceful-seconds",
            type=int,
            default=20,
            help="How long a stopping worker lets requests in flight finish (open event streams are cut).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1.")
        server = Server(
            APPLICATION,
            address=options["host"],
            port=options["port"],
            **granian_options(
                workers=options["workers"], graceful_seconds=max(1, options["graceful_seconds"])
            ),
        )
        self.stdout.write(f"web: {options['workers']} worker(s) on {options['host']}:{options['port']}")
        self.stdout.flush()
        # The system checks run before this may have opened a database connection, and with
        # DB_POOL the pool's first connection: the workers are forked from this process, and a
        # socket two workers share mixes their queries (one's transaction shows up in the
        # other's checkout). Each worker opens its own.
        for connection in connections.all(initialized_only=True):
            connection.close()
            close_pool = getattr(connection, "close_pool", None)
            if close_pool is not None:
                close_pool()
        server.serve()
