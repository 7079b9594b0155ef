"""Shared helpers for the source tests: a folder source under an allowed root, a sync run to
its end in this process, then the ingestion jobs it started."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from documents.kinds import INGEST
from documents.models import Tenant
from documents.services.collections import default_collection
from documents.sources.models import Source, SourceSync
from documents.sources.services import source_create, sync_start
from jobs.models import Job, Status
from tests.documents.helpers import run_until_idle


def folder_source(tenant: Tenant, folder: Path, **fields: Any) -> Source:
    return source_create(
        tenant=tenant,
        collection=default_collection(tenant),
        name="Handbook",
        config={"path": str(folder)},
        **fields,
    )


def write(folder: Path, key: str, text: str, *, mtime_ns: int | None = None) -> Path:
    path = folder / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def sync_job(source: Source) -> Job:
    """Start a sync and run its job in this process; the ingestion jobs it made stay queued."""
    started = sync_start(source=source)
    job = run_until_idle(started.sync.job_id)
    assert job.status == Status.READY, (job.status, job.error_code, job.error_message)
    return job


def ingest_all() -> int:
    """Run every queued ingestion job to its end; how many ran."""
    ran = 0
    for job_id in Job.objects.filter(kind=INGEST, status=Status.QUEUED).values_list("pk", flat=True):
        assert run_until_idle(job_id).status == Status.READY
        ran += 1
    return ran


def sync(source: Source) -> SourceSync:
    """A whole sync: the sync job, then its ingestion; the finished sync row."""
    job = sync_job(source)
    ingest_all()
    return SourceSync.objects.get(job=job)


def heartbeat_since(job_id: Any, since: Any) -> bool:
    """Whether the job's worker has beaten its heartbeat at or after ``since`` (a worker learns
    of a cancel with its next heartbeat)."""
    beat = Job.objects.get(pk=job_id).heartbeat_at
    return beat is not None and beat >= since


def allow_local_site(settings: Any) -> None:
    """The test sites listen on 127.0.0.1: the operator allows that address for web sources."""
    settings.SOURCES_WEB_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_WEB_TIMEOUT = 3
    settings.SOURCES_WEB_LISTING_TIMEOUT = 20


def web_source(tenant: Tenant, config: dict[str, Any], *, name: str = "Site", **fields: Any) -> Source:
    return source_create(
        tenant=tenant,
        collection=default_collection(tenant),
        name=name,
        kind=Source.Kind.WEB,
        config=config,
        **fields,
    )
