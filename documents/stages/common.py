"""What every stage handler of the document pipeline needs: its version, its workspace's embedders
and a local file."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import default_storage

from documents.causes import EMBEDDER_UNAVAILABLE, INPUT_GONE
from documents.embedders import tenant_embedders
from documents.embedders.base import Embedder
from documents.models import DocumentVersion
from jobs.context import StageContext
from jobs.errors import StageFailure


def version_of(ctx: StageContext) -> DocumentVersion:
    """The job's version with its document and tenant, read once for the stages one task runs
    in a row (``ctx.shared``). What they read of it does not change while the job runs, or is
    read fresh where it may (the tenant's embedders: ``tenant_embedders``), and every write
    stays fenced by the lease."""
    version = ctx.shared.get("version")
    if version is None:
        version = DocumentVersion.objects.select_related("document__tenant").get(pk=ctx.input["version_id"])
        ctx.shared["version"] = version
    assert isinstance(version, DocumentVersion)
    return version


def stage_embedders(version: DocumentVersion) -> list[Embedder]:
    """The version's workspace's embedders (``tenant_embedders``: read fresh), or the job's
    failure with its reason when this deployment cannot build one of them."""
    try:
        return tenant_embedders(version.document.tenant)
    except (ValueError, ImproperlyConfigured) as unavailable:  # UnknownEmbedder, or missing settings
        raise StageFailure(EMBEDDER_UNAVAILABLE.code, str(unavailable)[:300]) from unavailable


def local_file(ctx: StageContext, version: DocumentVersion) -> Path:
    """A path to the upload on this machine: the storage's own path when it has one, otherwise a
    copy in the attempt's private temp directory (removed with it)."""
    name = str(version.file.name)
    if version.bytes_freed_at is not None or not default_storage.exists(name):
        # Freed by the retention after a retry passed its check: a specific failure, not a crash.
        raise StageFailure(INPUT_GONE.code, f"stored file {name!r} of version {version.pk} is gone")
    try:
        return Path(default_storage.path(name))
    except NotImplementedError:
        target = ctx.temp_dir / f"upload.{version.kind}"
        with default_storage.open(name, "rb") as source, target.open("wb") as out:
            shutil.copyfileobj(source, out)
        return target
