"""Reads of sources: a workspace's sources, and where a source stands (its last sync, counts,
per-item failures, the next scheduled run) as the API, the admin and the command show it."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from documents.models import Tenant
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.schedules import next_run
from documents.sources.sync import COUNT_KEYS
from jobs.models import FINISHED
from jobs.pipelines import get as pipeline_of

MAX_FAILURES_SHOWN = 100


def sources_of(tenant: Tenant) -> QuerySet[Source]:
    return Source.objects.filter(tenant=tenant).select_related("collection")


def source_of(tenant: Tenant, source_id: Any) -> Source | None:
    try:
        pk = uuid.UUID(str(source_id))
    except (TypeError, ValueError, AttributeError):
        return None
    return sources_of(tenant).select_related("tenant").filter(pk=pk).first()


def last_sync(source: Source) -> SourceSync | None:
    return SourceSync.objects.filter(source=source).select_related("job").defer("listing", "plan").first()


def sync_out(sync: SourceSync) -> dict[str, Any]:
    """A sync as users read it: its job's state and progress, times, counts and failures."""
    job = sync.job
    finished = job.status in FINISHED
    started_at = job.started_at
    finished_at = job.finished_at if finished else None
    duration = (finished_at - started_at).total_seconds() if finished_at and started_at else None
    # Compare saves the planned counts; until the job finishes, failures are counted as they come.
    counts = {key: 0 for key in COUNT_KEYS} | dict(sync.counts or {})
    failures = SourceItem.objects.filter(last_sync=sync).exclude(error_code="").order_by("key")
    if not finished:
        counts["failed"] = failures.count()
    pipeline = pipeline_of(job.kind)
    return {
        "id": str(sync.pk),
        "job_id": str(job.pk),
        "status": job.status,
        "stage": job.stage,
        "state": job.state_word(),
        "state_label": pipeline.state_label(job.status, job.stage),
        "progress": round(job.progress, 1),
        "processed": job.processed,
        "total": job.total,
        "started_at": started_at.isoformat() if started_at else None,
        "finished_at": finished_at.isoformat() if finished_at else None,
        "duration_seconds": round(duration, 3) if duration is not None else None,
        "counts": counts,
        "failures": [
            {"key": item.key, "code": item.error_code, "message": item.error_message}
            for item in failures[:MAX_FAILURES_SHOWN]
        ],
        "error": {"code": job.error_code, "message": job.error_message} if job.error_code else None,
        "batch_id": str(sync.batch_id) if sync.batch_id else None,
    }


def source_out(source: Source) -> dict[str, Any]:
    """A source with its last sync and next scheduled run. Its settings as its creator gave
    them (a folder's path: nothing else of the server's file system is shown); of its secrets,
    only whether there are any."""
    sync = last_sync(source)
    upcoming = next_run(source)
    return {
        "id": str(source.pk),
        "name": source.name,
        "kind": source.kind,
        "collection": str(source.collection_id),
        "config": dict(source.config),
        "has_credentials": bool(source.credentials),
        "on_removal": source.on_removal,
        "schedule_minutes": source.schedule_minutes,
        "schedule_cron": source.schedule_cron or None,
        "next_sync_at": upcoming.isoformat() if upcoming else None,
        "created_at": source.created_at.isoformat(),
        "last_sync": sync_out(sync) if sync is not None else None,
    }


def location(source: Source) -> str:
    """Where a source's items come from, in one line as its creator gave it: the folder's path,
    ``s3://bucket/prefix`` (and the endpoint, if one) or the site's sitemap or first start URL."""
    config = source.config or {}
    if source.kind == Source.Kind.S3:
        where = f"s3://{config.get('bucket', '')}/{config.get('prefix', '')}"
        return f"{where} ({config['endpoint']})" if config.get("endpoint") else where
    if source.kind == Source.Kind.WEB:
        starts = config.get("start_urls") or [""]
        return str(config.get("sitemap") or starts[0])
    return str(config.get("path", ""))
