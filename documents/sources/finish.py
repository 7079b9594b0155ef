"""The end of a sync (the ``document.sync`` kind's ``on_finish`` hook): in the transaction that
finishes its job, whatever the outcome, the sync is closed with its counts, the documents it made
or changed and its failures become a batch (``batch.completed`` when their ingestion is done),
and a ready sync sends ``source.synced`` with the counts."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from documents.models import Batch, BatchItem
from documents.services.batches import batch_complete_if_done
from documents.services.webhooks import SOURCE_SYNCED, event_emit
from documents.sources.models import SourceItem, SourceSync
from documents.sources.sync import CHANGED, FAILED, NEW, planned_counts
from jobs.models import Job, Status


def sync_finished(job: Job) -> None:
    """The ``on_finish`` hook, in the transaction that finishes the sync's job: the sync is
    closed with its counts, its documents become a batch, and a ready sync is announced."""
    sync = SourceSync.objects.select_related("source__tenant").filter(job_id=job.pk).first()
    if sync is None:
        return
    acted = list(SourceItem.objects.filter(last_sync=sync).order_by("key"))
    counts = planned_counts(sync.plan, found=len(sync.listing)) if sync.plan else dict(sync.counts)
    counts[FAILED] = sum(1 for item in acted if item.error_code)
    batch_id = sync.batch_id or _batch_of(sync, acted)
    SourceSync.objects.filter(pk=sync.pk).update(finished_at=timezone.now(), counts=counts, batch_id=batch_id)
    if job.status == Status.READY:
        event_emit(
            tenant=sync.source.tenant,
            event_type=SOURCE_SYNCED,
            data={
                "source_id": str(sync.source_id),
                "sync_id": str(sync.pk),
                "job_id": str(job.pk),
                "batch_id": str(batch_id) if batch_id else None,
                "counts": counts,
            },
        )


def _batch_of(sync: SourceSync, acted: list[SourceItem]) -> Any:
    """A batch of the sync's new documents and versions and of its failures (None: none)."""
    shown = [
        item for item in acted if item.error_code or (item.last_action in (NEW, CHANGED) and item.job_id)
    ]
    if not shown:
        return None
    batch = Batch.objects.create(
        tenant=sync.source.tenant, created_by=sync.source.created_by, sealed_at=timezone.now()
    )
    BatchItem.objects.bulk_create(
        [
            BatchItem(
                batch=batch,
                position=position,
                filename=item.key[:255],
                document_id=None if item.error_code else item.document_id,
                job_id=None if item.error_code else item.job_id,
                error_code=item.error_code,
                error_message=item.error_message,
            )
            for position, item in enumerate(shown)
        ]
    )
    # Their jobs may be finishing right now: wait for those commits (row locks, in id order)
    # so the check below sees them and the batch is completed exactly once.
    job_ids = sorted(item.job_id for item in shown if item.job_id)
    list(Job.objects.select_for_update().filter(pk__in=job_ids).order_by("pk").values_list("pk", flat=True))
    batch_complete_if_done(batch_id=batch.pk)
    return batch.pk
