"""The tables of sources (imported by ``documents.models``, the app's model module).

A source belongs to a collection of a workspace. Each item it holds (a file, by its key: the
path relative to the source's folder) has a row recording the change marker and content hash it
had when it was last applied and the document it became; a sync compares the listing with these
rows. A sync is one job of the ``document.sync`` kind with one :class:`SourceSync` row: its
listing, its plan and, once finished, its counts. At most one sync of a source is unfinished at a
time (a partial unique constraint), whoever starts it.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Source(models.Model):
    class Kind(models.TextChoices):
        FOLDER = "folder", _("Folder")
        WEB = "web", _("Web site")
        S3 = "s3", _("S3-compatible bucket")

    class OnRemoval(models.TextChoices):
        DELETE = "delete", _("Delete the document")
        KEEP = "keep", _("Keep the document")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="+")
    collection = models.ForeignKey("documents.Collection", on_delete=models.CASCADE, related_name="sources")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FOLDER)
    name = models.CharField(max_length=200)
    # The kind's own settings (folder: {"path": "..."}), checked by the kind's module
    # (documents/sources/registry.py lists them); shown to members.
    config = models.JSONField(default=dict, blank=True)
    # The kind's secrets as one JSON object, encrypted (documents/sources/credentials.py); empty
    # when it has none. Never shown, logged or sent.
    credentials = models.TextField(blank=True, default="", editable=False)
    on_removal = models.CharField(max_length=10, choices=OnRemoval.choices, default=OnRemoval.DELETE)
    # Sync every N minutes, or at the times of a 5-field cron expression (at most one of the two);
    # neither: only when asked.
    schedule_minutes = models.PositiveIntegerField(null=True, blank=True)
    schedule_cron = models.CharField(max_length=100, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("source")
        verbose_name_plural = _("sources")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="source_tenant_recent")]

    def __str__(self) -> str:
        return self.name


class SourceItem(models.Model):
    """One item of a source as last applied: its marker and hash, and the document it became.

    Written in the same transaction as the upload, new version or delete that applied it, so a
    sync interrupted anywhere and run again sees what was done and does it once."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=1024)
    # The source's change marker (folder: "<mtime_ns>:<size>"); empty when the item failed
    # before it was ever applied.
    marker = models.CharField(max_length=200, blank=True, default="")
    sha256 = models.CharField(max_length=64, blank=True, default="")
    document = models.ForeignKey(
        "documents.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The sync that last acted on it, what it did and the ingestion job it started.
    last_sync = models.ForeignKey(
        "SourceSync", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_action = models.CharField(max_length=10, blank=True, default="")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Its last failure (cause code and user-safe words), cleared when it is applied.
    error_code = models.CharField(max_length=40, blank=True, default="")
    error_message = models.CharField(max_length=300, blank=True, default="")
    # Gone from the source while its document is kept (the source's on_removal = keep).
    removed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("source item")
        verbose_name_plural = _("source items")
        constraints = [models.UniqueConstraint(fields=["source", "key"], name="source_item_once")]

    def __str__(self) -> str:
        return self.key


class SourceSync(models.Model):
    """One sync of a source: its job, its listing and plan, and its counts once finished."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="syncs")
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="+")
    batch = models.ForeignKey(
        "documents.Batch", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # [[key, marker], ...] as listed, and [[key, action, marker, sha256], ...] as compared.
    listing = models.JSONField(default=list, blank=True)
    plan = models.JSONField(default=list, blank=True)
    # found / new / changed / removed / unchanged / failed.
    counts = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("source sync")
        verbose_name_plural = _("source syncs")
        ordering = ["-created_at"]
        constraints = [
            # Two syncs of one source never run at once, whichever path starts them.
            models.UniqueConstraint(
                fields=["source"], condition=models.Q(finished_at=None), name="source_one_open_sync"
            )
        ]

    def __str__(self) -> str:
        return f"sync of {self.source_id} ({self.created_at:%Y-%m-%d %H:%M})"
