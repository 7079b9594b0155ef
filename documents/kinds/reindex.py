"""The re-index job kind (``document.reindex``), registered with the job engine from outside it.

Stages: ``plan`` (the target is the tenant's again, e.g. after a retry; totals counted),
``embed`` (every published chunk without a target vector, in batches; resumable: what is left
to do is read from the tables, so a takeover after a SIGKILL repeats at most one batch) and
``gate`` (only when the re-index names a labelled query set: the set is evaluated with the
active and the target vectors, and a drop of MRR@10 beyond the margin fails the job with
``evaluation_worse`` before anything switched; ``documents.services.reindex_gate``) and
``switch`` (a last catch-up for versions published meanwhile; its publish hook switches the
tenant's active embedder in one commit). Progress is chunks done of the published total; the
status JSON adds versions done (``documents.services.reindex.counts``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from documents.causes import EVALUATION_WORSE, TARGET_GONE, VECTORS_MISSING
from documents.kinds import REINDEX
from jobs import pipelines
from jobs.errors import _ as _
from jobs.pipelines import Pipeline, Stage

if TYPE_CHECKING:
    from jobs.context import StageContext
    from jobs.models import Job

KIND = REINDEX


def _plan(ctx: StageContext) -> None:
    from documents.models import Tenant
    from documents.services.reindex import counts
    from jobs.errors import StageFailure

    tenant_id, target = ctx.input["tenant_id"], ctx.input["target"]
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().filter(pk=tenant_id).first()
        if tenant is None or tenant.reindex_job_id != ctx.job_id:
            raise StageFailure(TARGET_GONE.code, "the tenant's re-index is another job")
        # Again after a retry of a cancelled or failed run (its cleanup cleared the target).
        Tenant.objects.filter(pk=tenant_id).update(target_embedder=target)
    done = counts(tenant_id, target)
    ctx.progress(done.chunks_done, done.chunks)


def _embed_missing(ctx: StageContext) -> None:
    """Embed published chunks that lack a target vector, a batch per fenced write.

    The walk goes forward by (version, ordinal) from the checkpoint saved with the last batch
    (so no batch rereads what is done); counts are read once per run and then advanced by what
    each batch wrote. The switch stage runs it again from the start, which finds only versions
    published meanwhile."""
    from documents.embedders import embedder_for
    from documents.engines.chunking import embedded_text
    from documents.models import DocumentVersion
    from documents.services.reindex import counts, missing_chunks
    from documents.stages.embed import prepare_index, write_vectors

    tenant_id, target = ctx.input["tenant_id"], ctx.input["target"]
    embedder = embedder_for(target)
    size = settings.EMBEDDING_BATCH_SIZE
    done = counts(tenant_id, target)
    chunks_done, total = done.chunks_done, done.chunks
    ctx.progress(chunks_done, total)
    after = ctx.checkpoint.get("after")  # [version id, ordinal] of the last chunk written
    while True:
        ctx.check()
        todo = missing_chunks(tenant_id, target).order_by("version_id", "ordinal")
        if after is not None:
            version_id, ordinal = after
            todo = todo.filter(Q(version_id__gt=version_id) | Q(version_id=version_id, ordinal__gt=ordinal))
        part = list(todo.values_list("version_id", "ordinal", "text", "version__document__title")[:size])
        if not part:
            return
        # The model call happens outside any transaction; only the write below is fenced.
        texts = [embedded_text(title, text) for _, _, text, title in part]
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        prepare_index(embedder, vectors)
        by_version: dict[Any, list[int]] = defaultdict(list)
        for row, (version_id, *_rest) in enumerate(part):
            by_version[version_id].append(row)
        versions = DocumentVersion.objects.in_bulk(list(by_version))
        chunks_done += len(part)
        total = max(total, chunks_done)  # versions published since the count
        after = [str(part[-1][0]), part[-1][1]]
        with ctx.write(
            checkpoint={"after": after, "chunks_done": chunks_done}, done=chunks_done, total=total
        ):
            for version_id, rows in by_version.items():
                ordinals = [part[r][1] for r in rows]
                write_vectors(versions[version_id], ordinals[0], embedder, ordinals, vectors[rows])


def _gate(ctx: StageContext) -> None:
    """Evaluate the named query set with the active and the target vectors (each run resumes
    from its written batches) and refuse the switch when answers got worse beyond the margin."""
    if not ctx.input.get("gate"):
        return
    from documents.evaluation.runner import run_finish, run_through
    from documents.services.reindex_gate import gate_decide, gate_runs

    runs = gate_runs(ctx.job_id, ctx.input)
    total = runs[0].query_set.queries.count()
    for offset, run in enumerate(runs):

        def write(done: int, _total: int, offset: int = offset) -> Any:
            return ctx.write(checkpoint={"gate_run": offset}, done=offset * total + done, total=2 * total)

        run_through(run, check=ctx.check, write=write)
        run_finish(run)
        run.refresh_from_db()
    gate_decide(runs[0], runs[1], float(ctx.input["gate"]["margin"]))


def _switch(ctx: StageContext) -> None:
    """Catch up with versions published since the embed stage (a full walk: they may sort
    before the embed stage's last chunk); the hook then switches."""
    _embed_missing(ctx)


def _publish(job: Job) -> None:
    from documents.services.reindex import reindex_switch

    reindex_switch(job)


def _cleanup(job: Job, from_stage: str) -> None:
    from documents.services.reindex import reindex_cleanup

    reindex_cleanup(job, from_stage)


def _finished(job: Job) -> None:
    from documents.services.reindex import reindex_finished

    reindex_finished(job)


PIPELINE = Pipeline(
    kind=KIND,
    label="Re-index",
    stages=(
        Stage("plan", _plan, weight=2, label="Planning", unit="chunks", deadline=120),
        Stage("embed", _embed_missing, weight=95, label="Embedding", unit="chunks", deadline=300),
        Stage("gate", _gate, weight=5, label="Evaluating", unit="queries", deadline=300),
        Stage("switch", _switch, weight=3, label="Switching", unit="chunks", deadline=300),
    ),
    publish=_publish,
    cleanup=_cleanup,
    on_finish=_finished,
    causes=(TARGET_GONE, VECTORS_MISSING, EVALUATION_WORSE),
    state_labels={"gate_failed": _("Refused: answers got worse")},
)


def register() -> Pipeline:
    return pipelines.register(PIPELINE)
