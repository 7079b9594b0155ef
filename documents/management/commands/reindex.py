"""``manage.py reindex --tenant T [--embedder NAME] [--query-set ID --margin M] [--wait]``: start a
re-index of a workspace (with ``--query-set``, gated on an evaluation: docs/evaluation.md).

The job runs on the workers like any other (``--wait`` follows its progress until it ends; with
``--inline`` this process runs it, for a machine without a cluster). Search keeps using the
tenant's active embedder until the job switches it. Exits 1 when refused or not ready.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from documents.models import Tenant
from documents.services.reindex import ReindexRefused, counts, reindex_start
from jobs.executor import run_job
from jobs.models import FINISHED, Actor, Job, Status


class Command(BaseCommand):
    help = "Re-embed a workspace's published documents with another embedder, then switch search to it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="The workspace's slug.")
        parser.add_argument(
            "--embedder",
            default="",
            help="An embedder name (hashing-v1-512), a backend (local, hashing, http) or "
            "hashing:<dimension>; default: the configured embedder.",
        )
        parser.add_argument(
            "--query-set", default="", help="Gate the switch on this labelled query set's id."
        )
        parser.add_argument(
            "--margin", type=float, default=0.0, help="The MRR@10 drop the gate accepts (0-1, default 0)."
        )
        parser.add_argument("--wait", action="store_true", help="Follow the job until it ends.")
        parser.add_argument("--inline", action="store_true", help="Run the job in this process.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no workspace with the slug {options['tenant']!r}")
        try:
            job = reindex_start(
                tenant=tenant,
                embedder=options["embedder"],
                actor=Actor.OPERATOR,
                query_set=options["query_set"] or None,
                margin=options["margin"],
            )
        except ReindexRefused as refused:
            raise CommandError(f"{refused.message} ({refused.code})") from None
        target = job.payload["target"]
        self.stdout.write(f"re-index {job.pk}: {job.payload['from']} -> {target}")
        if options["inline"]:
            while run_job(job.pk) != "not claimed":
                pass
        elif not options["wait"]:
            return
        while True:
            job = Job.objects.get(pk=job.pk)
            done = counts(tenant.pk, target)
            self.stdout.write(
                f"{job.state_word():<12} versions {done.versions_done}/{done.versions}, "
                f"chunks {done.chunks_done}/{done.chunks}"
            )
            if job.status in FINISHED:
                break
            time.sleep(1)  # a person reads this; the worker does the work
        if job.status != Status.READY:
            raise CommandError(f"the re-index ended {job.state_word()}: {job.error_message}")
