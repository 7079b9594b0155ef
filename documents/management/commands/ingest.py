"""``manage.py ingest PATH... --tenant T``: upload files or folders and follow every job live.

Uploads go through the same service as the API and pages. A file whose name is the title of one
of the tenant's documents is uploaded as that document's next version. Each document gets a line with its
stage, a progress bar where an honest number exists, units done of total, and at the end its
state, or its error message and what to do. On a terminal the lines are live bars drawn by
``rich``, which measures what it drew (a line wrapped by a narrow terminal is redrawn in place);
elsewhere each changed line is printed once. It ends with the count of documents ready, failed
and rejected, and exits 1 if any upload was rejected or any job did not end ready.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.utils import timezone
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.table import Column

from documents.engines.validation import UploadRejected
from documents.models import Document, Tenant
from documents.services.collections import collection_of
from documents.services.upload import document_upload
from documents.templatetags.status_words import action_label, cause_message, state_label
from jobs.executor import run_job
from jobs.models import FINISHED, Job, Status
from jobs.selectors import JobView, job_view

BAR = 24

Draw = Callable[[dict[str, JobView]], None]


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


def label_of(name: str) -> str:
    return f"{name[:28]:<28}"


def where(view: JobView) -> str:
    """The stage and units done while running, after the state word."""
    units = f" · {view.processed} of {view.total} {view.unit}" if view.total and not view.finished else ""
    stage = "" if view.finished else f" stage {view.stage_index} of {view.stage_count} · {view.stage_label}"
    return f"{stage}{units}"


def advice(view: JobView) -> str:
    """What went wrong and what to do, or nothing."""
    if view.error is None:
        return ""
    return f"{cause_message(view.error)} {action_label(view.error['action'])}"


def render(name: str, view: JobView) -> str:
    """One document as a plain line (and its advice below it), for output that is not a terminal."""
    if view.progress is not None:
        filled = round(BAR * view.progress / 100)
        bar = f"[{'#' * filled}{'.' * (BAR - filled)}] {view.progress:5.1f}%"
    else:
        bar = f"[{' ' * BAR}]   -  "
    # The words the pages show ("Parsing failed", not parse_failed), in the active language.
    line = f"{label_of(name)} {bar}  {state_label(view.state):<24}{where(view)}"
    if view.error is not None:
        line += f"\n    {advice(view)}"
    return line


class _Through:
    """A file for ``rich`` that writes through the command's stdout (``call_command`` replaces
    it) without the newline ``OutputWrapper`` would add to each write."""

    def __init__(self, out: OutputWrapper) -> None:
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text, ending="")
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()


@dataclass
class Tally:
    ready: int = 0
    failed: int = 0
    rejected: int = 0
    unchanged: int = 0
    unfinished: int = 0

    def summary(self) -> str:
        parts = [f"{self.ready} ready", f"{self.failed} failed", f"{self.rejected} rejected"]
        if self.unchanged:
            parts.append(f"{self.unchanged} unchanged")
        if self.unfinished:
            parts.append(f"{self.unfinished} still processing")
        return ", ".join(parts)


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
        tally = Tally()
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
                self.stdout.write(f"{label_of(path.name)} rejected: {rejected.message} ({rejected.code})")
                tally.rejected += 1
                continue
            if result.duplicate:
                self.stdout.write(f"{label_of(path.name)} unchanged: identical to the published version")
                tally.unchanged += 1
                continue
            assert result.job is not None
            if result.version.reused_from_id is not None:
                self.stdout.write(
                    f"{label_of(path.name)} already processed in this workspace: its results are reused"
                )
            jobs[path.name] = result.job.pk
        if options["inline"]:
            for job_id in jobs.values():
                while run_job(job_id) == "done":
                    pass
        for view in self.follow(jobs, timeout=options["timeout"]).values():
            if view.status == Status.READY:
                tally.ready += 1
            elif view.status in FINISHED:
                tally.failed += 1
            else:
                tally.unfinished += 1
        self.stdout.write(tally.summary())
        if tally.failed or tally.rejected or tally.unfinished:
            sys.exit(1)

    def follow(self, jobs: dict[str, Any], *, timeout: float) -> dict[str, JobView]:
        """Show every job until all are finished (or ``timeout``); return how each was left."""
        console = Console(file=cast(IO[str], _Through(self.stdout)), highlight=False)
        if not console.is_terminal:
            return self._follow(jobs, timeout=timeout, draw=self._printer(), say=self.stderr.write)
        # On a narrow terminal the name is cut and the state wraps within its column; rich counts
        # the rows it drew, so the redraw lands where the last one began.
        bars = Progress(
            TextColumn("{task.fields[label]}", markup=False, table_column=Column(no_wrap=True, max_width=28)),
            BarColumn(bar_width=BAR),
            TextColumn("{task.fields[percent]}", markup=False, table_column=Column(no_wrap=True)),
            TextColumn(
                "{task.fields[where]}", markup=False, table_column=Column(overflow="fold", min_width=12)
            ),
            console=console,
            auto_refresh=False,
        )
        tasks: dict[str, TaskID] = {}
        with bars:

            def draw(views: dict[str, JobView]) -> None:
                for name, view in views.items():
                    # No honest number yet: the bar pulses instead of showing a made-up one.
                    total = None if view.progress is None else 100.0
                    percent = "   -  " if view.progress is None else f"{view.progress:5.1f}%"
                    if name not in tasks:
                        tasks[name] = bars.add_task("", total=total, label=name, percent=percent, where="")
                    bars.update(
                        tasks[name],
                        total=total,
                        completed=view.progress or 0.0,
                        percent=percent,
                        where=f"{state_label(view.state)}{where(view)}",
                    )
                bars.refresh()

            # Notes go above the live bars: written anywhere else they would be drawn over.
            views = self._follow(jobs, timeout=timeout, draw=draw, say=bars.console.print)
        for name, view in views.items():
            if view.error is not None:
                console.print(f"{label_of(name)} {advice(view)}", markup=False)
        return views

    def _printer(self) -> Draw:
        shown: dict[str, str] = {}

        def draw(views: dict[str, JobView]) -> None:
            for name, view in views.items():
                line = render(name, view)
                if shown.get(name) != line:
                    self.stdout.write(line)
                    shown[name] = line

        return draw

    def _follow(
        self, jobs: dict[str, Any], *, timeout: float, draw: Draw, say: Callable[[str], Any]
    ) -> dict[str, JobView]:
        started = time.monotonic()
        hinted = False
        while True:
            views = {name: job_view(Job.objects.get(pk=pk)) for name, pk in jobs.items()}
            draw(views)
            if all(v.finished for v in views.values()):
                return views
            waited = time.monotonic() - started
            if not hinted and waited > 30 and all(v.state == "queued" for v in views.values()):
                say("no worker has picked these up: is `manage.py qcluster` running? (or --inline)")
                hinted = True
            if waited > timeout:
                say(f"still running after {timeout:.0f}s at {timezone.now():%H:%M:%S}; stopped following")
                return views
            time.sleep(0.5)
