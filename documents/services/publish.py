"""Publishing a version (inside the job's ``ready`` transaction) and cleaning up after a run."""

from __future__ import annotations

import uuid

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from documents.causes import SUPERSEDED, VECTORS_MISSING
from documents.models import Chunk, ChunkVector, Document, DocumentVersion, IndexEntry, Page, Tenant
from jobs.errors import StageFailure
from jobs.models import Job
from jobs.services.cleanup import job_request_cleanup

# Which stage writes which outputs, in pipeline order: cleanup from a stage removes that stage's
# outputs and every later one's.
OUTPUTS_BY_STAGE = (
    ("parsing", (Page,)),
    ("ocr", ()),
    ("chunking", (Chunk,)),
    ("embedding", (ChunkVector,)),
    ("indexing", (IndexEntry,)),
)


def version_publish(job: Job) -> None:
    """The pipeline's publish hook: point the document at this version.

    Runs inside the short transaction that sets the job ``ready``, after the job row's
    compare-and-set (lock order: job, then document). Refuses (rolling all of it back) when a
    newer version of the document is already published: an older job never publishes over it.
    """
    version = DocumentVersion.objects.get(pk=job.payload["version_id"])
    # Serialises publishers of one document so two versions cannot both win.
    document = Document.objects.select_for_update().get(pk=version.document_id)
    # After the document (lock order: job, document, tenant): a re-index's switch holds the
    # tenant too, so this publish sees the active embedder before or after the switch, never
    # between its check and its commit.
    tenants = Tenant.objects.select_for_update().values_list("active_embedder", flat=True)
    active = tenants.get(pk=document.tenant_id)
    vectors = ChunkVector.objects.filter(version=version)
    if active and vectors.exists() and not vectors.filter(embedder=active).exists():
        # Embedded before a re-index switched the tenant: the indexing stage's retry embeds it
        # with the active embedder, then publishes (never a version search cannot rank).
        raise StageFailure(VECTORS_MISSING.code, "the version has no vectors of the active embedder")
    current = document.published_version
    if current is not None and current.number > version.number:
        detail = f"v{current.number} is already published; v{version.number} is not"
        raise StageFailure(SUPERSEDED.code, detail)
    now = timezone.now()
    # Its entries counted in the same statement (search sizes a filtered scope by them).
    entries = IndexEntry.objects.filter(version=OuterRef("pk")).values("version").annotate(n=Count("*"))
    DocumentVersion.objects.filter(pk=version.pk).update(
        published_at=now, entries=Coalesce(Subquery(entries.values("n")), 0)
    )
    if current is not None:
        DocumentVersion.objects.filter(pk=current.pk).update(superseded_at=now)
        # Its outputs go once this commits; the reaper removes them if this worker dies first.
        # (A published version was published by its job, and jobs are never deleted.)
        job_request_cleanup(job_id=current.job_id, from_stage=OUTPUTS_BY_STAGE[0][0])
    Document.objects.filter(pk=document.pk).update(published_version=version)


def version_cleanup(job: Job, from_stage: str) -> None:
    """The pipeline's cleanup hook after a cancel or a failure, or after a newer version replaced
    a published one: idempotent, never touches a published version. A superseded version can
    never publish, so all of its outputs go."""
    if job.error_code == SUPERSEDED.code:
        from_stage = OUTPUTS_BY_STAGE[0][0]
    remove_outputs(job.payload["version_id"], from_stage)


def remove_outputs(version_ref: uuid.UUID | str, from_stage: str) -> None:
    version_id = uuid.UUID(str(version_ref))
    if Document.objects.filter(published_version_id=version_id).exists():
        return
    names = [name for name, _ in OUTPUTS_BY_STAGE]
    start = names.index(from_stage) if from_stage in names else 0
    # Reverse order: index entries reference chunks.
    for _, models in reversed(OUTPUTS_BY_STAGE[start:]):
        for model in models:
            model.objects.filter(version_id=version_id).delete()
    if from_stage == "ocr":
        Page.objects.filter(version_id=version_id, needs_ocr=True).update(text="", ocr_engine="")
