"""``manage.py eval_search --tenant T --query-set ID [--import FILE] [--inline | --wait]``: evaluate
search against a labelled query set (docs/evaluation.md) and print its figures per mode and
language; ``--run ID`` prints a finished run's figures, ``--compare ID`` compares against it.

The run is a job like any other: by default this starts it on the workers and prints its id;
``--wait`` follows it, ``--inline`` runs it in this process (a machine without a cluster). Exits
1 on bad input (unknown workspace, set or run, a bad import line) or a run that did not finish.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from documents.evaluation.labels import LabelsInvalid
from documents.evaluation.metrics import NAMES
from documents.evaluation.models import EvaluationRun, LabelledQuerySet
from documents.models import Tenant
from documents.search import MODES
from documents.services.evaluation import EvaluationRefused, evaluation_start, query_set_import, runs_compare
from jobs.executor import run_job
from jobs.models import FINISHED, Actor, Job, Status

# What a comparison's 95 % interval says of a mode and language's change (``paired_difference``).
VERDICTS = {"better": "clearly better", "worse": "clearly worse", "unclear": "not clear of the noise"}


def figures_table(run: EvaluationRun) -> list[str]:
    """The run's summary as a fixed-width table, a row per mode and language."""
    head = f"{'mode':<10}{'language':<10}{'queries':>8}" + "".join(f"{name:>11}" for name in NAMES)
    rows = [head]
    for mode, languages in run.summary.items():
        for language, figures in languages.items():
            values = "".join(f"{figures[name]:>11.4f}" for name in NAMES)
            rows.append(f"{mode:<10}{language:<10}{figures['queries']:>8}{values}")
    return rows


class Command(BaseCommand):
    help = "Evaluate search against a labelled query set and print recall@k, MRR@10 and nDCG@10."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="The workspace's slug.")
        parser.add_argument("--query-set", default="", help="The labelled query set's id.")
        parser.add_argument(
            "--import", dest="import_file", default="", help="Add queries from a JSON Lines file first."
        )
        parser.add_argument(
            "--embedder", default="", help="Search with this embedder's vectors (default: active)."
        )
        parser.add_argument(
            "--modes", default="", help=f"Comma-separated, of {', '.join(MODES)} (default: all)."
        )
        parser.add_argument(
            "--run", default="", help="Print this finished run's figures instead of starting one."
        )
        parser.add_argument(
            "--compare", default="", help="Also compare the run against this earlier run's id."
        )
        parser.add_argument("--wait", action="store_true", help="Follow the job until it ends.")
        parser.add_argument("--inline", action="store_true", help="Run the job in this process.")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no workspace with the slug {options['tenant']!r}")
        run = self._run(tenant, options["run"]) if options["run"] else self._start(tenant, options)
        if run is None:
            return
        if not run.summary:
            raise CommandError("the run has no figures (it has not finished)")
        for line in figures_table(run):
            self.stdout.write(line)
        if options["compare"]:
            base = self._run(tenant, options["compare"])
            compared = runs_compare(base, run)
            self.stdout.write(
                f"against {base.pk}: {compared['wins']} wins, {compared['losses']} losses, "
                f"{compared['ties']} ties ({compared['metric']})"
            )
            for mode, languages in compared["intervals"].items():
                for language, change in languages.items():
                    self.stdout.write(
                        f"  {mode:<9} {language:<3} {compared['metric']} {change['mean']:+.4f} "
                        f"(95 % interval {change['low']:+.4f} to {change['high']:+.4f}, "
                        f"{change['queries']} queries): {VERDICTS[change['verdict']]}"
                    )
            for row in compared["queries"]:
                if row["outcome"] != "tie":
                    self.stdout.write(
                        f"  {row['outcome']:<5} {row['mode']:<9} {row['base']:.4f} -> "
                        f"{row['other']:.4f}  {row['query'][:60]}"
                    )

    def _run(self, tenant: Tenant, run_id: str) -> EvaluationRun:
        try:
            run = EvaluationRun.objects.filter(tenant=tenant, pk=run_id).first()
        except Exception:  # not an id at all (a malformed UUID)
            run = None
        if run is None:
            raise CommandError(f"no evaluation run {run_id!r} in this workspace")
        return run

    def _start(self, tenant: Tenant, options: dict[str, Any]) -> EvaluationRun | None:
        try:
            query_set = LabelledQuerySet.objects.filter(tenant=tenant, pk=options["query_set"]).first()
        except Exception:  # not an id at all
            query_set = None
        if query_set is None:
            raise CommandError(f"no query set {options['query_set']!r} in this workspace")
        if options["import_file"]:
            try:
                data = Path(options["import_file"]).read_bytes()
            except OSError:
                raise CommandError(f"cannot read {options['import_file']!r}") from None
            try:
                added = query_set_import(query_set=query_set, data=data)
            except LabelsInvalid as bad:
                raise CommandError(f"line {bad.line}: {bad.reason}; nothing was imported") from None
            self.stdout.write(f"imported {added} queries")
        modes = [m.strip() for m in options["modes"].split(",") if m.strip()] or None
        try:
            run = evaluation_start(
                query_set=query_set, embedder=options["embedder"], modes=modes, actor=Actor.OPERATOR
            )
        except EvaluationRefused as refused:
            raise CommandError(f"{refused.message} ({refused.code})") from None
        assert run.job is not None
        self.stdout.write(f"evaluation run {run.pk} (job {run.job.pk}) with {run.embedder}")
        if options["inline"]:
            while run_job(run.job.pk) != "not claimed":
                pass
        elif not options["wait"]:
            return None
        while True:
            job = Job.objects.get(pk=run.job.pk)
            if job.status in FINISHED:
                break
            self.stdout.write(f"{job.state_word():<10} {job.processed or 0}/{job.total or '?'} queries")
            time.sleep(1)  # a person reads this; the worker does the work
        if job.status != Status.READY:
            raise CommandError(f"the evaluation ended {job.state_word()}: {job.error_message}")
        return EvaluationRun.objects.get(pk=run.pk)
