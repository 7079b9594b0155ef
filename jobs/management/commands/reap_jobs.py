"""``manage.py reap_jobs``: one pass (``--once``), a report (``--dry-run``) or a loop."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from jobs.services.reaper import reap

# What a pass did, said as what it would do.
WOULD = {
    "stalled": "stall",
    "recovered": "recover",
    "given_up": "give up",
    "left_for_operator": "leave for an operator",
    "cancelled": "finish cancelling",
    "dispatched": "dispatch again",
    "cleaned": "clean up",
    "swept": "sweep",
}


class Command(BaseCommand):
    help = "Stall expired leases, finish orphaned cancels, re-dispatch lost tasks, run cleanups."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument("--dry-run", action="store_true", help="Report, change nothing.")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="Seconds between passes in loop mode (default JOBS_REAPER_INTERVAL).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"] or settings.JOBS_REAPER_INTERVAL
        if options["once"] or options["dry_run"]:
            self._pass(dry_run=options["dry_run"])
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"reaper: a pass every {interval:g}s")
        while not stop.is_set():
            close_old_connections()
            try:
                self._pass(dry_run=False, quiet=True)
            except Exception as exc:  # a database restart must not end the loop
                self.stderr.write(f"reaper pass failed: {type(exc).__name__}; retrying")
            stop.wait(interval)

    def _pass(self, *, dry_run: bool, quiet: bool = False) -> None:
        counts = reap(dry_run=dry_run).counts()
        if not quiet or any(counts.values()):
            if dry_run:
                text = ", ".join(f"would {WOULD.get(name, name)}: {n}" for name, n in counts.items())
                text = f"dry run, nothing changed; {text}"
            else:
                text = ", ".join(f"{name.replace('_', ' ')}: {n}" for name, n in counts.items())
            self.stdout.write(text)
