"""Re-index a tenant with another embedder without going dark (docs/api.md, "Re-index").

A re-index is a job of the ``document.reindex`` kind (``documents/kinds/reindex.py``). Starting one
records the *target* embedder on the tenant; from then on ingestion embeds new versions with the
active and the target embedder, and the job embeds every published version's chunks with the
target. Search keeps ranking with the *active* embedder's vectors throughout. The switch stage's
publish hook moves the tenant to the target in one commit (refused while a published version
still lacks target vectors); the old vectors are removed by the reaper's sweep a grace period
after that commit (a search that read the old active embedder just before may still use them).
A cancel (or a failure) clears the target and removes the target's vectors: the active embedder
never stopped serving.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_noop

from documents.causes import TARGET_GONE, VECTORS_MISSING
from documents.embedders import (
    EmbedderTooWide,
    UnknownEmbedder,
    check_dimension,
    configured_embedder,
    embedder_for,
    tenant_embedder_name,
)
from documents.kinds import REINDEX as KIND
from documents.models import Chunk, ChunkVector, IndexEntry, Tenant
from documents.services.reindex_gate import GateRefused, gate_check
from documents.texts import Text
from jobs.errors import StageFailure
from jobs.models import FINISHED, Actor, Job, Status
from jobs.services.lifecycle import job_create

# Old vectors removed per statement: a tenant's may be many, and one huge DELETE holds locks long.
REMOVE_BATCH = 5000


class ReindexRefused(Exception):
    """A re-index that cannot start, with a user-safe code, message and HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.http_status = status
        self.code = code
        self.message = message


def reindex_start(
    *,
    tenant: Tenant,
    embedder: str = "",
    actor: Actor = Actor.USER,
    actor_name: str = "",
    query_set: Any = None,
    margin: float = 0.0,
) -> Job:
    """Start re-indexing ``tenant`` with ``embedder`` (a name or backend; default: the configured
    embedder). Refused (409) while another re-index of the tenant is unfinished or when the
    embedder is already the active one; an unknown embedder is a 400. With ``query_set`` (an
    id) the switch is gated on an evaluation: it happens only if the semantic MRR@10 with the new
    vectors is not lower than with the old by more than ``margin``
    (``documents.services.reindex_gate``)."""
    try:
        target = embedder_for(embedder) if embedder else configured_embedder()
    except (UnknownEmbedder, ValueError):
        raise ReindexRefused(
            400, "unknown_embedder", gettext_noop("No embedder of that name is available.")
        ) from None
    try:
        check_dimension(target)
    except EmbedderTooWide:
        message = Text(
            gettext_noop("Embedders here make vectors of at most %(count)s dimensions."),
            count=settings.EMBEDDINGS_MAX_DIMENSION,
        )
        raise ReindexRefused(400, "embedder_too_wide", message) from None
    gate = None
    if query_set:
        try:
            gate = gate_check(tenant=tenant, query_set_id=query_set, margin=margin)
        except GateRefused as refused:
            raise ReindexRefused(400, refused.code, refused.message) from None
    active = tenant_embedder_name(tenant)
    with transaction.atomic():
        # The tenant row is the lock: two concurrent starts must not both pass the check.
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        running = locked.reindex_job
        if running is not None and running.status not in FINISHED:
            raise ReindexRefused(
                409, "reindex_running", gettext_noop("A re-index of this workspace is already running.")
            )
        if target.name == active:
            raise ReindexRefused(
                409, "already_active", gettext_noop("The workspace already searches with that embedder.")
            )
        number = Job.objects.filter(kind=KIND, subject_id=str(tenant.pk)).count() + 1
        job = job_create(
            kind=KIND,
            tenant=tenant.slug,
            subject_id=str(tenant.pk),
            subject_version=number,
            payload={
                "tenant_id": tenant.pk,
                "target": target.name,
                "from": active,
                **({"gate": gate} if gate else {}),
            },
            actor=actor,
            actor_name=actor_name,
        )
        # The target is set now (not when the plan stage runs): uploads from this commit on are
        # embedded with both, so nothing published during the re-index is left behind.
        Tenant.objects.filter(pk=tenant.pk).update(reindex_job=job, target_embedder=target.name)
    return job


def reindex_job(tenant: Tenant, job_id: Any) -> Job | None:
    """The tenant's re-index job ``job_id`` (None for another tenant's or an unknown id)."""
    return Job.objects.filter(pk=job_id, kind=KIND, subject_id=str(tenant.pk)).first()


# --- what the stages read ------------------------------------------------------------------------


def published_chunks(tenant_id: Any) -> QuerySet[Chunk]:
    """Chunks of the tenant's published versions (of live documents)."""
    return Chunk.objects.filter(
        version__document__tenant_id=tenant_id,
        version__document__deleted_at=None,
        version__document__published_version=F("version"),
    )


def missing_chunks(tenant_id: Any, embedder: str) -> QuerySet[Chunk]:
    """Published chunks without a vector of ``embedder``: what is left to embed."""
    has_vector = ChunkVector.objects.filter(
        version_id=OuterRef("version_id"), ordinal=OuterRef("ordinal"), embedder=embedder
    )
    return published_chunks(tenant_id).exclude(Exists(has_vector))


@dataclass(frozen=True)
class Counts:
    versions: int
    chunks: int
    versions_done: int
    chunks_done: int


def counts(tenant_id: Any, embedder: str) -> Counts:
    """Versions and chunks done (with ``embedder``'s vectors) of the published total."""
    chunks = published_chunks(tenant_id)
    missing = missing_chunks(tenant_id, embedder)
    total_chunks = chunks.count()
    total_versions = chunks.values("version_id").distinct().count()
    left_chunks = missing.count()
    left_versions = missing.values("version_id").distinct().count()
    return Counts(total_versions, total_chunks, total_versions - left_versions, total_chunks - left_chunks)


# --- the hooks -----------------------------------------------------------------------------------


def reindex_switch(job: Job) -> None:
    """The switch stage's publish hook (inside the commit that makes the job ready): the tenant
    searches with the target from this commit on. Refuses (raises) while a published version
    lacks target vectors, so no version becomes unfindable by meaning."""
    tenant = Tenant.objects.select_for_update().get(pk=job.payload["tenant_id"])
    target = job.payload["target"]
    if tenant.reindex_job_id != job.pk or tenant.target_embedder != target:
        raise StageFailure(TARGET_GONE.code, "the re-index is no longer the tenant's current one")
    if missing_chunks(tenant.pk, target).exists():
        # Published after the switch stage's catch-up: the retry embeds it, then switches.
        raise StageFailure(VECTORS_MISSING.code, "a published version has no target vectors yet")
    # The old vectors are not removed here: a search that read the active embedder just before
    # this commit may still be ranking with them. The reaper removes them after the grace.
    Tenant.objects.filter(pk=tenant.pk).update(
        active_embedder=target, target_embedder="", retired_embedder=tenant.active_embedder
    )


def reindex_cleanup(job: Job, from_stage: str) -> None:
    """After a cancel or a failure: the target is dropped and its vectors removed; the active
    embedder (never changed) keeps serving. Idempotent; a newer re-index is left alone."""
    tenant_id, target = job.payload["tenant_id"], job.payload["target"]
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().filter(pk=tenant_id).first()
        if tenant is None or tenant.reindex_job_id != job.pk or tenant.active_embedder == target:
            return
        Tenant.objects.filter(pk=tenant_id).update(target_embedder="")
    _remove_vectors(tenant_id, target)


def reindex_finished(job: Job) -> None:
    """``on_finish``: a ready re-index becomes the ``reindex.completed`` webhook event."""
    if job.status != Status.READY:
        return
    from documents.services.webhooks import REINDEX_COMPLETED, event_emit

    tenant = Tenant.objects.get(pk=job.payload["tenant_id"])
    data = {"job_id": str(job.pk), "embedder": job.payload["target"], "previous": job.payload["from"]}
    event_emit(tenant=tenant, event_type=REINDEX_COMPLETED, data=data)


def retired_vectors_remove(*, tenant_id: Any) -> bool:
    """Remove the vectors of the tenant's retired embedder once ``REINDEX_RETIRE_GRACE_SECONDS``
    have passed since the switch; True when done."""
    tenant = Tenant.objects.select_related("reindex_job").filter(pk=tenant_id).first()
    if tenant is None or not tenant.retired_embedder:
        return False
    switched = tenant.reindex_job.finished_at if tenant.reindex_job else None
    grace = timedelta(seconds=settings.REINDEX_RETIRE_GRACE_SECONDS)
    if switched is not None and timezone.now() < switched + grace:
        return False
    retired = tenant.retired_embedder
    # A new re-index back to the retired embedder reuses its vectors rather than losing them.
    if retired not in (tenant.active_embedder, tenant.target_embedder):
        _remove_vectors(tenant_id, retired)
        IndexEntry.objects.filter(tenant_id=tenant_id, embedder=retired).update(
            embedder=tenant.active_embedder
        )
    Tenant.objects.filter(pk=tenant_id, retired_embedder=retired).update(retired_embedder="")
    return True


def retired_vectors_sweep(limit: int) -> list[Any]:
    """The reaper's sweep: remove retired vectors whose grace has passed (also a removal a
    reaper died in: it is idempotent)."""
    pending = Tenant.objects.exclude(retired_embedder="").values_list("pk", flat=True)[:limit]
    return [pk for pk in list(pending) if retired_vectors_remove(tenant_id=pk)]


def _remove_vectors(tenant_id: Any, embedder: str) -> None:
    rows = ChunkVector.objects.filter(version__document__tenant_id=tenant_id, embedder=embedder)
    while True:
        ids = list(rows.values_list("pk", flat=True)[:REMOVE_BATCH])
        if not ids:
            return
        ChunkVector.objects.filter(pk__in=ids).delete()
