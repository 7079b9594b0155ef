"""``manage.py check_jobs``: run the invariant checks; exit 1 listing offenders if any."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jobs.audit import (
    CHECKS,
    INVARIANTS,
    audit_mark_advance,
    check_violations,
    progress_watermark,
    violations,
)


class Command(BaseCommand):
    help = (
        "Audit the job table's invariants; exits non-zero when one is broken. The event log is "
        "checked from where the previous run stopped; --full checks all of it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--full",
            action="store_true",
            help="Check the whole event log and count stage runs (slow on big tables).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        full = options["full"]
        since = progress_watermark()
        found = violations(full=full)
        for invariant in INVARIANTS:
            rows = found.get(invariant.name)
            if rows is None:
                self.stdout.write(f"ok   {invariant.name}: {invariant.description}")
                continue
            detail = f"({len(rows)})" if rows else "(the index that forbids it is missing or invalid)"
            self.stdout.write(f"FAIL {invariant.name}: {invariant.description} {detail}")
            for job in rows:
                self.stdout.write(
                    f"     job {job.pk} kind={job.kind} status={job.status} stage={job.stage} "
                    f"version={job.version} progress={job.progress}"
                )
        app_found = check_violations()
        for check in CHECKS.values():
            offenders = app_found.get(check.name)
            if offenders is None:
                self.stdout.write(f"ok   {check.name}: {check.description}")
                continue
            self.stdout.write(f"FAIL {check.name}: {check.description} ({len(offenders)})")
            for line in offenders:
                self.stdout.write(f"     {line}")
        scope = "the whole event log" if full or not since else f"events after #{since}"
        self.stdout.write(f"progress checked over {scope}")
        audit_mark_advance()
        if found or app_found:
            self.stderr.write(f"{len(found) + len(app_found)} invariant(s) broken")
            sys.exit(1)
        self.stdout.write("all invariants hold")
