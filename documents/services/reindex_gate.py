"""A re-index gated on an evaluation (docs/evaluation.md, "Gated re-index").

When a re-index names a labelled query set, its ``gate`` stage (after every published chunk has
the target's vectors, before the switch) runs the set twice through the real search path: with
the active embedder's vectors (``before``) and with the target's (``after``). The switch goes
ahead only if the MRR@10 of ``after``'s ranking by meaning is not lower than ``before``'s by
more than the margin (the semantic mode: the only ranking an embedder changes; hybrid figures
are stored beside it, the full text being the same for both); otherwise the stage fails with
``evaluation_worse``, the cleanup drops the target's vectors, and the active embedder, which
never stopped serving, stays. Both runs stay, linked to the re-index
(``EvaluationRun.gate_of``), so the comparison can be read.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils.translation import gettext_noop

from documents.causes import EVALUATION_WORSE
from documents.evaluation.models import EvaluationRun, LabelledQuerySet
from documents.evaluation.runner import configuration
from documents.models import Tenant
from jobs.errors import StageFailure

GATE_MODE = "semantic"  # the ranking the embedder makes; full text is the same before and after
GATE_METRIC = "mrr@10"


class GateRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def gate_check(*, tenant: Tenant, query_set_id: Any, margin: float) -> dict[str, Any]:
    """The ``gate`` of a re-index's payload, or ``GateRefused`` (a 400) for a set that is not the
    tenant's, or has no queries, or a margin outside 0-1."""
    if not 0 <= margin <= 1:
        raise GateRefused("invalid_margin", gettext_noop("The margin is a number from 0 to 1."))
    try:
        query_set = LabelledQuerySet.objects.filter(tenant=tenant, pk=uuid.UUID(str(query_set_id))).first()
    except ValueError:  # not an id at all
        query_set = None
    if query_set is None:
        raise GateRefused("unknown_query_set", gettext_noop("No query set of that id in this workspace."))
    if not query_set.queries.exists():
        raise GateRefused("empty_query_set", gettext_noop("The query set has no queries yet."))
    return {"query_set_id": str(query_set.pk), "margin": margin}


def gate_runs(job_id: Any, payload: dict[str, Any]) -> tuple[EvaluationRun, EvaluationRun]:
    """The gate's before and after runs, made once (a resumed gate finds them)."""
    gate = payload["gate"]
    runs = []
    with transaction.atomic():
        for embedder in (payload["from"], payload["target"]):
            run, _ = EvaluationRun.objects.get_or_create(
                gate_of_id=job_id,
                embedder=embedder,
                defaults={
                    "tenant_id": payload["tenant_id"],
                    "query_set_id": gate["query_set_id"],
                    "modes": [GATE_MODE, "hybrid"],
                    "config": configuration(embedder),
                },
            )
            runs.append(run)
    return runs[0], runs[1]


def figure(run: EvaluationRun) -> float:
    return float(run.summary.get(GATE_MODE, {}).get("all", {}).get(GATE_METRIC, 0.0))


def gate_decide(before: EvaluationRun, after: EvaluationRun, margin: float) -> None:
    """Raise ``evaluation_worse`` when ``after`` lost more than ``margin`` of MRR@10."""
    was, now = figure(before), figure(after)
    if now < was - margin:
        raise StageFailure(
            EVALUATION_WORSE.code,
            f"semantic MRR@10 {now:.4f} with {after.embedder} against {was:.4f} with {before.embedder} "
            f"(margin {margin})",
        )


def gate_of(job: Any) -> dict[str, Any] | None:
    """The gate's figures for a re-index's status (None for an ungated re-index)."""
    gate = (job.payload or {}).get("gate")
    if not gate:
        return None
    runs = {r.embedder: r for r in EvaluationRun.objects.filter(gate_of=job.pk)}
    before, after = runs.get(job.payload["from"]), runs.get(job.payload["target"])
    done = before is not None and after is not None and bool(before.summary) and bool(after.summary)
    return {
        "query_set_id": gate["query_set_id"],
        "margin": gate["margin"],
        "before_run_id": str(before.pk) if before else None,
        "after_run_id": str(after.pk) if after else None,
        "mrr_before": figure(before) if done and before else None,
        "mrr_after": figure(after) if done and after else None,
        "passed": (figure(after) >= figure(before) - gate["margin"]) if done and before and after else None,
    }
