"""What every stage handler of the document pipeline needs: its version and a local file."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.core.files.storage import default_storage

from documents.causes import INPUT_GONE
from documents.models import DocumentVersion
from jobs.context import StageContext
from jobs.errors import StageFailure


def version_of(ctx: StageContext) -> DocumentVersion:
    return DocumentVersion.objects.select_related("document").get(pk=ctx.input["version_id"])


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
