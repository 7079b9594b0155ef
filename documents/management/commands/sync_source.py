"""``manage.py sync_source <source id> [--wait] [--inline]``: sync a source now (docs/sources.md).

Starts a sync (or, when one is running, follows that one): the job runs on the workers like any
other; ``--wait`` follows it until it ends, ``--inline`` runs it in this process (for a machine
without a cluster; the ingestion of what it found still runs on the workers). Prints the counts
and each item's failure. Exits 1 when refused or when the sync did not end ready.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from documents.sources.models import Source
from documents.sources.selectors import sync_out
from documents.sources.services import SourceRefused, sync_start
from jobs.executor import run_job
from jobs.models import FINISHED, Actor, Job, Status


class Command(BaseCommand):
    help = "Sync a source now: new, changed and removed items become uploads, versions and deletes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="The source's id (GET /api/sources lists them).")
        parser.add_argument("--wait", action="store_true", help="Follow the sync until it ends.")
        parser.add_argument("--inline", action="store_true", help="Run the sync's job in this process.")

    def handle(self, *args: Any, **options: Any) -> None:
        pk = _uuid(options["source"])
        source = Source.objects.select_related("tenant").filter(pk=pk).first() if pk else None
        if source is None:
            raise CommandError(f"no source with the id {options['source']!r}")
        try:
            started = sync_start(source=source, actor=Actor.OPERATOR, actor_name="sync_source")
        except SourceRefused as refused:
            raise CommandError(f"{refused.message} ({refused.code})") from None
        sync = started.sync
        verb = "started" if started.created else "already running"
        self.stdout.write(f"sync {sync.pk} of {source.name}: {verb} (job {sync.job_id})")
        if options["inline"]:
            while run_job(sync.job_id) != "not claimed":
                pass
        elif not options["wait"]:
            return
        while True:
            job = Job.objects.get(pk=sync.job_id)
            if job.status in FINISHED:
                break
            self.stdout.write(f"{job.state_word():<10} {job.progress:5.1f} %")
            time.sleep(1)  # a person reads this; the worker does the work
        sync.refresh_from_db()
        shown = sync_out(sync)
        counts = shown["counts"]
        self.stdout.write(
            f"{shown['state']}: found {counts['found']}, new {counts['new']}, changed {counts['changed']}, "
            f"removed {counts['removed']}, unchanged {counts['unchanged']}, failed {counts['failed']}"
        )
        for failure in shown["failures"]:
            self.stdout.write(f"  failed {failure['key']}: {failure['message']} ({failure['code']})")
        if job.status != Status.READY:
            raise CommandError(f"the sync ended {job.state_word()}: {job.error_message}")


def _uuid(value: str) -> str | None:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
