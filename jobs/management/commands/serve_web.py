"""``manage.py serve_web``: the web server, one uvicorn process per worker, each on its own socket.

uvicorn's own ``--workers`` share one listening socket, and a process that wakes first accepts
every pending connection: with keep-alive clients one process then serves all of them while the
other idles (seen in bench/status_endpoint.py as rounds at half the rate, one worker's CPU still).
Here every worker gets its own socket on the same port with ``SO_REUSEPORT``, so the kernel
spreads new connections across them. A worker that dies is started again on its socket (the
connections the kernel queued there wait for it); SIGTERM or SIGINT stops them all gracefully.

Each worker serves ``config.asgi:application`` (sync views on the WSGI handler's threads, async
views on the ASGI handler; config/dispatch.py) with httptools and uvloop.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import uvicorn
from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs import proctree

_FAST_EXITS_BEFORE_GIVING_UP = 5  # a worker that cannot start (bad settings) is not restarted forever


def uvicorn_proxy_options() -> dict[str, Any]:
    """No proxy headers unless ``FORWARDED_ALLOW_IPS`` names the trusted proxies: uvicorn
    otherwise believes X-Forwarded-For from 127.0.0.1, and a local client could pose as any
    address (the /metrics allow-list, per-address throttles)."""
    trusted = os.environ.get("FORWARDED_ALLOW_IPS", "").strip()
    if not trusted:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": trusted}


def listening_sockets(host: str, port: int, count: int, backlog: int = 2048) -> list[socket.socket]:
    """``count`` sockets listening on one address, the kernel balancing connections across them."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sockets: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.set_inheritable(True)
        # Port 0 picks a port once; the other sockets join it.
        address = (address[0], sock.getsockname()[1], *address[2:])
        sockets.append(sock)
    return sockets


def serve_one(fd: int, *, graceful_seconds: int) -> None:
    """One uvicorn worker on the inherited listening socket ``fd``."""
    # socket(fileno=...) reads the family from the descriptor; uvicorn's own --fd takes every
    # descriptor for a Unix socket, which leaves TCP connections without TCP_NODELAY (each small
    # response then waits out a delayed ACK, about 40 ms).
    sock = socket.socket(fileno=fd)
    config = uvicorn.Config(
        "config.asgi:application",
        http="httptools",
        loop="uvloop",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=graceful_seconds,
        **uvicorn_proxy_options(),
    )
    uvicorn.Server(config).run(sockets=[sock])


def _die_with_parent() -> None:
    proctree.die_with_parent(signal.SIGTERM)


class Command(BaseCommand):
    help = "Serve the web application with N uvicorn workers, each on its own socket of one port."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--workers",
            type=int,
            default=int(os.environ.get("WEB_WORKERS", "2")),
            help="uvicorn processes (WEB_WORKERS, default 2; one per core on a web machine, or more "
            "where requests wait on the database).",
        )
        parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)  # one worker, on this socket
        parser.add_argument(
            "--graceful-seconds",
            type=int,
            default=20,
            help="How long a stopping worker lets requests in flight finish (open event streams are cut).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["fd"] is not None:
            serve_one(options["fd"], graceful_seconds=options["graceful_seconds"])
            return
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1.")
        try:
            sockets = listening_sockets(options["host"], options["port"], options["workers"])
        except OSError as exc:
            address = f"{options['host']}:{options['port']}"
            raise CommandError(f"Cannot listen on {address}: {exc.strerror}") from None
        port = sockets[0].getsockname()[1]

        def start(sock: socket.socket) -> subprocess.Popen[bytes]:
            command = [
                *(sys.executable, os.path.abspath(sys.argv[0]), "serve_web"),
                *("--fd", str(sock.fileno()), "--graceful-seconds", str(options["graceful_seconds"])),
            ]
            return subprocess.Popen(command, pass_fds=(sock.fileno(),), preexec_fn=_die_with_parent)

        workers = [start(sock) for sock in sockets]
        started = [time.monotonic()] * len(workers)
        fast_exits = [0] * len(workers)
        self.stdout.write(f"web: {len(workers)} worker(s) on {options['host']}:{port}")
        stop = proctree.stop_on_signals()
        code = 0
        while not stop.wait(0.2):
            for i, worker in enumerate(workers):
                if worker.poll() is None:
                    continue
                fast_exits[i] = fast_exits[i] + 1 if time.monotonic() - started[i] < 5 else 1
                if fast_exits[i] >= _FAST_EXITS_BEFORE_GIVING_UP:
                    self.stderr.write(f"web worker {i} keeps exiting ({worker.returncode}); stopping")
                    code = 1
                    stop.set()
                    break
                self.stderr.write(f"web worker {i} exited with {worker.returncode}; starting it again")
                workers[i], started[i] = start(sockets[i]), time.monotonic()
        proctree.terminate_all(workers, grace=options["graceful_seconds"] + 5)
        sys.exit(code)
