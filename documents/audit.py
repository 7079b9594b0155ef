"""The documents' own ``check_jobs`` check: nothing derived from a deleted document outlives its
cleanup. Registered with the engine's generic audit from ``DocumentsConfig.ready``."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Q
from django.utils import timezone

from documents.models import DocumentVersion
from documents.services.publish import OUTPUTS_BY_STAGE
from jobs.audit import Check


def _deleted_before() -> Q:
    cutoff = timezone.now() - timedelta(seconds=settings.DOCUMENTS_DELETE_AUDIT_GRACE)
    return Q(deleted_at__lt=cutoff) | Q(document__deleted_at__lt=cutoff)


def deleted_leftovers(limit: int) -> list[str]:
    """Derived rows and stored files of versions deleted (alone or with their document) longer
    than the grace ago: a finished cleanup removes them and the version rows themselves."""
    found: list[str] = []
    deleted = DocumentVersion.objects.filter(_deleted_before())
    # By ``version_id`` like ``remove_outputs``: any output table keyed so is covered.
    for _, models in OUTPUTS_BY_STAGE:
        for model in models:
            rows = model.objects.filter(version_id__in=deleted.values("pk"))
            for version_id in rows.order_by().values_list("version_id", flat=True).distinct()[:limit]:
                found.append(f"{model._meta.label} rows of deleted version {version_id}")
    for version in deleted.order_by("pk")[:limit]:
        if version.file.name and default_storage.exists(version.file.name):
            found.append(f"stored file of deleted version {version.pk}")
    return found[:limit]


LEFTOVERS = Check(
    "deleted_document_leftovers",
    "derived rows or stored files of a deleted document or version",
    deleted_leftovers,
)
