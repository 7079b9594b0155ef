"""The evaluation job kind (``document.evaluate``), registered with the job engine from outside it.

Stages: ``search`` (every labelled query of the set searched in each mode and scored, a batch
of queries per fenced write; resumable: what is left is read from the result rows, so a
takeover after a SIGKILL repeats at most one batch) and ``score`` (the summary per mode and
language, stored by the publish hook in the commit that makes the job ready). A cancel or a
failure removes the run's result rows: a run has figures only when it finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from documents.kinds import EVALUATE
from jobs import pipelines
from jobs.errors import _ as _
from jobs.pipelines import Pipeline, Stage

if TYPE_CHECKING:
    from jobs.context import StageContext
    from jobs.models import Job

KIND = EVALUATE


def _search(ctx: StageContext) -> None:
    from documents.evaluation.models import EvaluationRun
    from documents.evaluation.runner import run_through

    run = EvaluationRun.objects.select_related("query_set").get(pk=ctx.input["run_id"])
    run_through(
        run,
        check=ctx.check,
        write=lambda done, total: ctx.write(checkpoint={"done": done}, done=done, total=total),
    )


def _score(ctx: StageContext) -> None:
    ctx.check()


def _publish(job: Job) -> None:
    from documents.evaluation.models import EvaluationRun
    from documents.evaluation.runner import run_finish

    run_finish(EvaluationRun.objects.get(pk=job.payload["run_id"]))


def _cleanup(job: Job, from_stage: str) -> None:
    from documents.evaluation.models import EvaluationResult

    EvaluationResult.objects.filter(run_id=job.payload["run_id"]).delete()


PIPELINE = Pipeline(
    kind=KIND,
    label="Evaluation",
    stages=(
        Stage("search", _search, weight=95, label="Searching", unit="queries", deadline=300),
        Stage("score", _score, weight=5, label="Scoring", deadline=120),
    ),
    publish=_publish,
    cleanup=_cleanup,
)


def register() -> Pipeline:
    return pipelines.register(PIPELINE)
