"""Tenants, documents, versions and each version's stage outputs (pages, chunks, vectors, index).

A version's outputs are keyed so that re-running a stage writes nothing twice: pages by
(version, number), chunks and vectors by (version, ordinal). ``IndexEntry`` is the search index;
search only ever reads entries of a document's *published* version.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from jobs.models import Job


class Tenant(models.Model):
    """A workspace: its members see its documents and nothing else."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    max_running_jobs = models.PositiveIntegerField(default=4)
    max_queued_jobs = models.PositiveIntegerField(default=200)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name or self.slug


class Membership(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user"], name="membership_one_tenant_per_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant}"


class Document(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    latest_number = models.PositiveIntegerField(default=0)
    latest_version = models.ForeignKey(
        "DocumentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_version = models.ForeignKey(
        "DocumentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Typed attributes for search filters (jsonb on PostgreSQL); written only through
    # documents.services.attributes, which enforces documents.attributes' rules.
    attributes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="document_tenant_recent")]

    def __str__(self) -> str:
        return self.title


class DocumentVersion(models.Model):
    """One upload of a document, processed by exactly one job."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    file = models.FileField(upload_to="uploads/%Y/%m/", max_length=300)
    original_name = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, help_text="Type sniffed from the content.")
    content_type = models.CharField(max_length=100)
    encoding = models.CharField(max_length=32, blank=True, default="")
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64, db_index=True)
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["document", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="version_number_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.document} v{self.number}"


class Page(models.Model):
    """A page's text: from the text layer (parsing) or from OCR."""

    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="pages")
    number = models.PositiveIntegerField()
    text = models.TextField(blank=True, default="")
    blocks = models.JSONField(default=list, blank=True)
    needs_ocr = models.BooleanField(default=False)
    ocr_engine = models.CharField(max_length=32, blank=True, default="")
    ocr_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["version", "number"]
        constraints = [models.UniqueConstraint(fields=["version", "number"], name="page_once")]


class Chunk(models.Model):
    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    page_start = models.PositiveIntegerField()
    page_end = models.PositiveIntegerField()
    heading_path = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["version", "ordinal"]
        constraints = [models.UniqueConstraint(fields=["version", "ordinal"], name="chunk_once")]


class ChunkVector(models.Model):
    """A chunk's embedding, written by the embedding stage in batches (``batch``)."""

    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="vectors")
    ordinal = models.PositiveIntegerField()
    batch = models.PositiveIntegerField()
    embedder = models.CharField(max_length=100)
    vector = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "ordinal"], name="vector_once")]


class IndexEntry(models.Model):
    """The search index: one row per chunk of a version.

    ``tenant_id`` and ``document_id`` are copied here so that search filters by tenant first.
    ``search_text`` is what the full-text index holds (``documents.retrieval.text``); the full-text
    index itself (FTS5 table / ``tsvector`` column) is in ``documents.retrieval.schema``. The
    chunk's vector is not copied: it stays in its ``ChunkVector`` (one copy), which the dense
    ranking joins by ``(version, ordinal)``.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="index_entries")
    chunk = models.OneToOneField(Chunk, on_delete=models.CASCADE, related_name="index_entry")
    ordinal = models.PositiveIntegerField()
    batch = models.PositiveIntegerField()
    embedder = models.CharField(max_length=100)
    search_text = models.TextField(default="", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "ordinal"], name="index_entry_once")]
        indexes = [models.Index(fields=["tenant", "embedder"], name="index_entry_tenant")]


class ProviderSlot(models.Model):
    """A cross-process concurrency slot for an external provider (e.g. an embeddings API).

    Held by one caller until ``expires_at``; a crashed holder's slot frees itself on expiry.
    """

    provider = models.CharField(max_length=100)
    number = models.PositiveIntegerField()
    holder = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "number"], name="provider_slot_unique")]
