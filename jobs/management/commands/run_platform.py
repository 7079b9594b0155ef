"""``manage.py run_platform``: the web server, the django-q2 clusters and the reaper loop.

One command for a single machine. On several machines run the parts separately (see
docs/deployment.md): ``manage.py serve_web``, ``manage.py qcluster`` (once more for each of
``Q_CLUSTER``'s ``ALT_CLUSTERS``, with ``Q_CLUSTER_NAME`` set to its name) and
``manage.py reap_jobs``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from jobs import proctree


class Command(BaseCommand):
    help = "Run the web server, the task clusters and the reaper until interrupted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument(
            "--then",
            action="append",
            default=[],
            metavar="COMMAND",
            help="A manage.py command line to run once the platform is up (e.g. an ingest).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        python = sys.executable
        manage = os.path.join(os.getcwd(), "manage.py")
        web_env = {**os.environ, "DB_POOL": os.environ.get("DB_POOL", "1")}
        worker_env = {**os.environ, "DB_CONN_MAX_AGE": os.environ.get("DB_CONN_MAX_AGE", "60")}
        parts = {
            "web": (
                [python, manage, "serve_web", "--host", options["host"], "--port", str(options["port"])],
                web_env,
            ),
            "workers": ([python, manage, "qcluster"], worker_env),
            "reaper": ([python, manage, "reap_jobs"], worker_env),
        }
        # Queues with workers of their own (q2 reads the cluster's name from the environment).
        for name in settings.Q_CLUSTER.get("ALT_CLUSTERS", {}):
            parts[f"workers:{name}"] = ([python, manage, "qcluster"], {**worker_env, "Q_CLUSTER_NAME": name})
        procs = {name: subprocess.Popen(cmd, env=env) for name, (cmd, env) in parts.items()}
        url = f"http://{options['host']}:{options['port']}/"
        self.stdout.write(f"platform running: {url}  (Ctrl-C stops it)")
        # Each runs beside the platform; its exit does not stop the platform.
        followers = {line: subprocess.Popen([python, manage, *shlex.split(line)]) for line in options["then"]}
        stop = proctree.stop_on_signals()
        code = 0
        while not stop.wait(0.5):
            exited = [(name, proc) for name, proc in procs.items() if proc.poll() is not None]
            if exited:
                name, proc = exited[0]
                self.stderr.write(f"{name} exited with {proc.returncode}; stopping the platform")
                code = proc.returncode or 1
                break
            for line, follower in list(followers.items()):
                # poll() reaps a follower that ended: none is left a zombie beside the platform.
                if follower.poll() is not None:
                    del followers[line]
                    self.stdout.write(self.ended(line, follower.returncode, url))
        # The cluster drains within JOBS_DRAIN_SECONDS (jobs handed back at their checkpoints).
        everything = [*procs.values(), *followers.values()]
        proctree.terminate_all(everything, grace=settings.JOBS_DRAIN_SECONDS + 5)
        sys.exit(code)

    @staticmethod
    def ended(line: str, returncode: int, url: str) -> str:
        """The line that says a ``--then`` command is over, and that the platform goes on."""
        outcome = "done" if returncode == 0 else f"ended with exit status {returncode} (see above)"
        return f"`{line}`: {outcome}. The platform keeps running: {url}  (Ctrl-C stops it)"
