"""``manage.py ingest PATH... --tenant T``: upload files or folders and follow every job live.

Uploads go through the same service as the API and pages. A file whose name is the title of one
of the tenant's documents is uploaded as that document's next version. Each document gets a line with its
stage, a progress bar where an honest number exists, units done of total, and at the end its
state, or its error message and what to do. Exits 1 if any upload was rejected or any job did
not end ready.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from documents.engines.validation import UploadRejected
from documents.models import Document, Tenant
from documents.services.collections import collection_of
from documents.services.upload import document_upload
from documents.templatetags.status_words import action_label, cause_message, state_label
from jobs.executor import run_job
from jobs.models import Job
from jobs.selectors import JobView, job_view

BAR = 24


def collect(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            found.append(path)
        else:
            raise CommandError(f"no such file or folder: {raw}")
    return found


def render(name: str, view: JobView) -> str:
    label = f"{name[:28]:<28}"
    if view.progress is not None:
        filled = round(BAR * view.progress / 100)
        bar = f"[{'#' * filled}{'.' * (BAR - filled)}] {view.progress:5.1f}%"
    else:
        bar = f"[{' ' * BAR}]   -  "
    units = f" · {view.processed} of {view.total} {view.unit}" if view.total and not view.finished else ""
    where = "" if view.finished else f" stage {view.stage_index} of {view.stage_count} · {view.stage_label}"
    # The words the pages show ("Parsing failed", not parse_failed), in the active language.
    line = f"{label} {bar}  {state_label(view.state):<24}{where}{units}"
    if view.error is not None:
        line += f"\n    {cause_message(view.error)} {action_label(view.error['action'])}"
    return line


class Command(BaseCommand):
    help = "Upload files or folders through the upload service and follow each job to its end."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+")
        parser.add_argument(
            "--tenant", required=True, help="Tenant slug (it must exist, see --create-tenant)."
        )
        parser.add_argument(
            "--create-tenant", action="store_true", help="Create the tenant when no tenant has that slug."
        )
        parser.add_argument(
            "--inline",
            action="store_true",
            help="Run the jobs in this process instead of waiting for workers.",
        )
        parser.add_argument(
            "--collection",
            default="",
            help="Id of the collection new documents go into (default: the default one).",
        )
        parser.add_argument("--timeout", type=float, default=1800, help="Seconds to follow before giving up.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            if not options["create_tenant"]:
                raise CommandError(
                    f"no tenant has the slug {options['tenant']!r}: check the spelling, "
                    "or add --create-tenant to create it"
                )
            tenant = Tenant.objects.create(slug=options["tenant"], name=options["tenant"])
        collection = None
        if options["collection"]:
            collection = collection_of(tenant, options["collection"])
            if collection is None:
                raise CommandError(f"the tenant has no collection with the id {options['collection']!r}")
        failed = 0
        jobs: dict[str, Any] = {}
        for path in collect(options["paths"]):
            # A file named like one of the tenant's documents becomes its next version (identical
            # bytes are answered as unchanged), so ingesting a folder again acts like a sync.
            existing = Document.objects.filter(tenant=tenant, title=path.name).order_by("-created_at").first()
            try:
                with path.open("rb") as handle:
                    result = document_upload(
                        tenant=tenant,
                        data=handle,
                        filename=path.name,
                        document=existing,
                        collection=collection,
                    )
            except UploadRejected as rejected:
                self.stdout.write(f"{path.name[:28]:<28} rejected: {rejected.message} ({rejected.code})")
                failed += 1
                continue
            if result.duplicate:
                self.stdout.write(f"{path.name[:28]:<28} unchanged: identical to the published version")
                continue
            assert result.job is not None
            if result.version.reused_from_id is not None:
                self.stdout.write(
                    f"{path.name[:28]:<28} already processed in this workspace: its results are reused"
                )
            jobs[path.name] = result.job.pk
        if options["inline"]:
            for job_id in jobs.values():
                while run_job(job_id) == "done":
                    pass
        failed += self.follow(jobs, timeout=options["timeout"])
        if failed:
            self.stderr.write(f"{failed} document(s) did not become searchable")
            sys.exit(1)

    def follow(self, jobs: dict[str, Any], *, timeout: float) -> int:
        """Redraw one line per job until all are finished; return how many did not end ready."""
        tty = self.stdout.isatty()
        started = time.monotonic()
        hinted = False
        shown: dict[str, str] = {}
        drawn = 0
        while True:
            views = {name: job_view(Job.objects.get(pk=pk)) for name, pk in jobs.items()}
            lines = {name: render(name, view) for name, view in views.items()}
            if tty:
                if drawn:
                    self.stdout.write(f"\x1b[{drawn}F\x1b[J", ending="")
                text = "\n".join(lines.values())
                self.stdout.write(text)
                drawn = text.count("\n") + 1
            else:
                for name, line in lines.items():
                    if shown.get(name) != line:
                        self.stdout.write(line)
                shown = lines
            if all(v.finished for v in views.values()):
                break
            waited = time.monotonic() - started
            if not hinted and waited > 30 and all(v.state == "queued" for v in views.values()):
                self.stderr.write(
                    "no worker has picked these up: is `manage.py qcluster` running? (or --inline)"
                )
                hinted = True
            if waited > timeout:
                self.stderr.write(
                    f"still running after {timeout:.0f}s at {timezone.now():%H:%M:%S}; stopped following"
                )
                break
            time.sleep(0.5)
        return sum(1 for v in views.values() if v.state != "ready")
