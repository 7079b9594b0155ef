"""``manage.py check_jobs``: run the invariant queries; exit 1 listing offenders if any."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand

from jobs.audit import INVARIANTS, violations


class Command(BaseCommand):
    help = "Audit the job table's invariants; exits non-zero when one is broken."

    def handle(self, *args: Any, **options: Any) -> None:
        found = violations()
        for invariant in INVARIANTS:
            rows = found.get(invariant.name, [])
            mark = "FAIL" if rows else "ok"
            self.stdout.write(f"{mark:4} {invariant.name}: {invariant.description} ({len(rows)})")
            for job in rows:
                self.stdout.write(
                    f"     job {job.pk} kind={job.kind} status={job.status} stage={job.stage} "
                    f"version={job.version} progress={job.progress}"
                )
        if found:
            self.stderr.write(f"{len(found)} invariant(s) broken")
            sys.exit(1)
        self.stdout.write("all invariants hold")
