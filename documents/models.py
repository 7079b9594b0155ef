"""Tenants, documents, versions and each version's stage outputs (pages, chunks, vectors, index).

A version's outputs are keyed so that re-running a stage writes nothing twice: pages by
(version, number), chunks and vectors by (version, ordinal). ``IndexEntry`` is the search index;
search only ever reads entries of a document's *published* version.
"""

# long-module: every table of the documents app in the one module Django reads models from: tenants,
# documents and versions, their stage outputs and the lifecycle (deletions, webhooks, batches).

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from documents import credentials
from jobs.models import Job


class Tenant(models.Model):
    """A workspace: its members see its documents and nothing else."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    max_running_jobs = models.PositiveIntegerField(default=4)
    max_queued_jobs = models.PositiveIntegerField(default=200)
    # Stored bytes the tenant may hold (documents/services/storage.py); empty: the setting
    # DOCUMENTS_TENANT_MAX_STORAGE_BYTES, 0: no limit.
    max_storage_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Re-index (documents/kinds/reindex.py): the embedder whose vectors search and ingestion use
    # (empty until first needed: then the configured one), the one a running re-index embeds
    # with, and the one whose vectors a finished switch still has to remove.
    active_embedder = models.CharField(max_length=100, blank=True, default="")
    target_embedder = models.CharField(max_length=100, blank=True, default="")
    retired_embedder = models.CharField(max_length=100, blank=True, default="")
    reindex_job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        verbose_name = _("tenant")
        verbose_name_plural = _("tenants")
        # An operator power beyond viewing or editing a workspace: a re-index re-embeds every
        # version it has (documents/admin.py's action).
        permissions = [("reindex_tenant", "Can start a re-index of a workspace")]

    def __str__(self) -> str:
        return self.name or self.slug


class Membership(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    created_at = models.DateTimeField(default=timezone.now)
    # A workspace admin manages its groups and every access list of the workspace
    # (documents/services/access.py); set in the admin.
    is_admin = models.BooleanField(_("workspace admin"), default=False)

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [models.UniqueConstraint(fields=["user"], name="membership_one_tenant_per_user")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant}"


def default_access() -> list[str]:
    return ["everyone"]


class Collection(models.Model):
    """A knowledge base of a tenant: every document belongs to exactly one (the /v1 facade's
    vector store). Names need not be unique (OpenAI's vector stores allow equal names); the id
    is the handle. Each tenant has one default collection (``is_default``), made on first need
    by ``documents.services.collections.default_collection``; uploads without a collection go there.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=256)
    description = models.TextField(blank=True, default="")
    # Free key/value pairs kept for the /v1 facade (vector store ``metadata``); not interpreted.
    metadata = models.JSONField(default=dict, blank=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    # Hybrid search's weights of the full-text and the dense list (0-1, not both 0; the /v1
    # ``ranking_options.hybrid_search`` weights override them per request). See
    # documents/retrieval/fusion.py.
    text_weight = models.FloatField(
        _("text weight"),
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("How much full-text matches count in hybrid search (0-1)."),
    )
    embedding_weight = models.FloatField(
        _("embedding weight"),
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("How much matches by meaning count in hybrid search (0-1)."),
    )
    # The default access list of its documents: principal keys ("everyone", "user:<id>",
    # "group:<id>"); documents/services/access.py writes it and the grants it implies.
    access = models.JSONField(_("access"), default=default_access, blank=True)

    class Meta:
        verbose_name = _("collection")
        verbose_name_plural = _("collections")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant"], condition=models.Q(is_default=True), name="collection_one_default"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="collection_tenant_recent")]

    def __str__(self) -> str:
        return self.name


def _file_id() -> str:
    return f"file-{uuid.uuid4().hex}"


class Document(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="documents")
    # PROTECT: a collection goes only through collection_delete, which deletes its documents
    # (files, outputs, audit) through the delete service first.
    collection = models.ForeignKey(Collection, on_delete=models.PROTECT, related_name="documents")
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
    # Lifecycle: a deleted document is a tombstone (filtered by every selector) until its
    # cleanup removes the row; see documents/services/delete.py.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Typed attributes for search filters (jsonb on PostgreSQL); written only through
    # documents.services.attributes, which enforces documents.attributes' rules.
    attributes = models.JSONField(default=dict, blank=True)
    # When a version was last added (upload, process again): the lists' default order, so a
    # document with a new version moves up.
    last_activity_at = models.DateTimeField(default=timezone.now)
    # /v1: every document of a collection is a file of its vector store, whichever API made it.
    # file_id is the file object's id when the document was made from one (so the same file in
    # two stores keeps one id), a fresh ``file-...`` id otherwise.
    file_id = models.CharField(max_length=40, default=_file_id, editable=False)
    # The chunking a /v1 attachment asked for ({"type": "static", ...}); empty: the settings'.
    chunking_strategy = models.JSONField(default=dict, blank=True)
    file_batch = models.ForeignKey(
        "VectorStoreFileBatch", null=True, blank=True, on_delete=models.SET_NULL, related_name="documents"
    )
    # Its own access list (principal keys), or empty (NULL): its collection's. Search and every
    # list read the grants it implies (DocumentGrant), never this field.
    access = models.JSONField(_("access"), null=True, blank=True, default=None)

    class Meta:
        verbose_name = _("document")
        verbose_name_plural = _("documents")
        ordering = ["-created_at"]
        # Operators who see every document whatever its access list (admin, API, search).
        permissions = [("view_all_documents", "Can see every document whatever its access list")]
        constraints = [
            # One live file per id in a store; a deleted one's tombstone does not block re-attaching.
            models.UniqueConstraint(
                fields=["collection", "file_id"],
                condition=models.Q(deleted_at__isnull=True),
                name="document_file_once",
            ),
        ]
        indexes = [
            # /v1/files/{id} answers for a document's file id as well as for a file object's.
            models.Index(fields=["tenant", "file_id"], name="document_tenant_file"),
            models.Index(fields=["tenant", "-created_at"], name="document_tenant_recent"),
            models.Index(fields=["tenant", "-last_activity_at"], name="document_tenant_activity"),
            models.Index(fields=["collection", "-created_at"], name="document_collection_recent"),
            # Tombstones awaiting cleanup: few, read by the leftovers audit.
            models.Index(
                fields=["deleted_at"], condition=models.Q(deleted_at__isnull=False), name="document_deleted"
            ),
        ]

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
    deleted_at = models.DateTimeField(null=True, blank=True)  # lifecycle tombstone
    # When the reaper removed the stored bytes of this cancelled, failed or superseded version
    # after the retention (documents/services/storage.py); the row and its history stay.
    bytes_freed_at = models.DateTimeField(null=True, blank=True)
    # Dedup: the earlier published version of the same tenant whose verified outputs (pages,
    # chunks, vectors, index rows) this version copied instead of processing the bytes again.
    reused_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    # The processing settings (chunk sizes, embedder) its outputs were made with, as a key:
    # dedup reuses a version's outputs only for the same bytes *and* the same settings.
    processing = models.CharField(max_length=64, blank=True, default="")
    # Its index entries, counted in the publish (unknown for a version published before): what
    # the dense ranking sums to size a filtered scope (documents.retrieval.pgvector).
    entries = models.PositiveIntegerField(null=True, blank=True)
    # The sizes its chunks were cut with ({"max_chunk_size_tokens": n, "chunk_overlap_tokens": m}),
    # written with the chunks (copied with them by dedup); null before the chunk stage ran.
    chunking = models.JSONField(null=True, blank=True)
    # What the full-text ranking reads of the version as a whole, written with its index entries
    # (documents.retrieval.index.record_version): the words of the title each entry's search text
    # opens with, and the words of all its entries with that title counted once (null before
    # they were indexed).
    search_title = models.TextField(blank=True, default="")
    search_terms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = _("document version")
        verbose_name_plural = _("document versions")
        ordering = ["document", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="version_number_unique"),
        ]
        indexes = [
            models.Index(
                fields=["deleted_at"], condition=models.Q(deleted_at__isnull=False), name="version_deleted"
            ),
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
        # One vector per chunk and embedder: a re-index adds the target's beside the active's.
        constraints = [
            models.UniqueConstraint(
                fields=["version", "ordinal", "embedder"], name="vector_once_per_embedder"
            )
        ]


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


class Deletion(models.Model):
    """The audit record of a delete (who, when, which ids; no content) and, while ``cleaned_at``
    is empty, the pending-cleanup marker the reaper's sweep finishes. It outlives the document."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    document_id = models.UUIDField()
    # Empty: the whole document; otherwise that one version.
    version_number = models.PositiveIntegerField(null=True, blank=True)
    version_ids = models.JSONField(default=list, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_name = models.CharField(max_length=150, blank=True, default="")
    via = models.CharField(max_length=16, default="api")
    requested_at = models.DateTimeField(default=timezone.now)
    cleaned_at = models.DateTimeField(null=True, blank=True)
    rows_removed = models.PositiveIntegerField(default=0)
    files_removed = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = _("deletion")
        verbose_name_plural = _("deletions")
        ordering = ["-requested_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["document_id"],
                condition=models.Q(version_number__isnull=True),
                name="deletion_once_per_document",
            ),
            models.UniqueConstraint(
                fields=["document_id", "version_number"],
                condition=models.Q(version_number__isnull=False),
                name="deletion_once_per_version",
            ),
        ]
        indexes = [
            models.Index(
                fields=["requested_at"], condition=models.Q(cleaned_at__isnull=True), name="deletion_pending"
            ),
        ]

    def __str__(self) -> str:
        what = f"v{self.version_number} of " if self.version_number else ""
        return f"delete {what}{self.document_id}"


# --- Lifecycle: webhooks ------------------------------------------------------------------------


class WebhookEndpoint(models.Model):
    """A tenant's URL that is told about its documents' terminal states (Standard Webhooks)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    # ``whsec_`` + base64: shown once at creation; kept because every payload is signed with it,
    # encrypted with a key derived from SECRET_KEY (documents/credentials.py): read ``secret``.
    secret_encrypted = models.TextField(editable=False)
    description = models.CharField(max_length=200, blank=True, default="")
    # The owner: told only about the documents they may see. Deleting the user deletes their
    # endpoints (an endpoint left without its owner would become workspace-wide); no owner at
    # all means workspace-wide (made by the platform, or before owners were recorded).
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")
        ordering = ["tenant", "created_at"]
        indexes = [models.Index(fields=["tenant", "enabled"], name="webhook_endpoint_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.url}"

    @property
    def secret(self) -> str:
        """The signing secret, decrypted (``SecretUnreadable`` when no configured key opens it)."""
        return credentials.decrypt(self.secret_encrypted)

    @secret.setter
    def secret(self, value: str) -> None:
        self.secret_encrypted = credentials.encrypt(value)


class WebhookMessage(models.Model):
    """One event for one endpoint: written in the commit that makes the event true (an outbox),
    sent by the workers after it, retried with backoff until delivered or out of attempts."""

    # Not ``status``: that word is the jobs' (the layout test keeps its writers in one place).
    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="messages")
    event_type = models.CharField(max_length=40)
    payload = models.JSONField()
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When the next attempt is due; a sender moves it ahead while it sends (its claim).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When a task was last handed to the workers for it (the reaper re-sends lost ones).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("webhook message")
        verbose_name_plural = _("webhook messages")
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(state="pending"),
                name="webhook_message_due",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.webhook_id}"

    @property
    def webhook_id(self) -> str:
        return f"msg_{self.pk.hex}"


class WebhookAttempt(models.Model):
    """One try at sending a message: what the endpoint answered (no body kept), how long it took."""

    message = models.ForeignKey(WebhookMessage, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField(default=timezone.now)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        verbose_name = _("webhook attempt")
        verbose_name_plural = _("webhook attempts")
        ordering = ["message", "at"]


# --- Lifecycle: batches -------------------------------------------------------------------------


class Batch(models.Model):
    """Many files uploaded in one request: one document each (or a per-file refusal)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="batches")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Set once every file of the request is recorded: a job that finishes while later files are
    # still being uploaded cannot complete the batch before them.
    sealed_at = models.DateTimeField(null=True, blank=True)
    # Set once, when the batch is sealed and the last of its jobs finished (then
    # ``batch.completed`` is sent).
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"batch {self.pk}"


class BatchItem(models.Model):
    """One file of a batch: its document and job, or why it was refused (nothing stored then)."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    filename = models.CharField(max_length=255)
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error_code = models.CharField(max_length=40, blank=True, default="")
    error_message = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["batch", "position"]
        constraints = [models.UniqueConstraint(fields=["batch", "position"], name="batch_item_once")]


# --- /v1 (OpenAI-compatible API): file objects ----------------------------------------------------


class FileObject(models.Model):
    """Bytes uploaded through ``POST /v1/files``: stored once, attachable to several vector stores
    (each attachment becomes a document of that collection, made from these bytes by the upload
    service). Written only by documents.services.files."""

    id = models.CharField(primary_key=True, max_length=40, default=_file_id, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="file_objects")
    filename = models.CharField(max_length=255)
    purpose = models.CharField(max_length=32)
    bytes = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    stored_name = models.CharField(max_length=500)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # Keyset pagination walks (tenant, created_at, id) in either direction.
        indexes = [models.Index(fields=["tenant", "created_at", "id"], name="fileobject_tenant_keyset")]

    def __str__(self) -> str:
        return f"{self.id} ({self.filename})"


# --- /v1: vector stores (collections) and their files ---------------------------------------------


def _batch_id() -> str:
    return f"vsfb_{uuid.uuid4().hex}"


class VectorStoreSettings(models.Model):
    """What a vector store adds to its collection: expiry and the chunking it asked for.
    Written only by documents.services.vector_stores; a collection without a row has none."""

    collection = models.OneToOneField(
        "Collection", primary_key=True, on_delete=models.CASCADE, related_name="vector_store"
    )
    expires_after_days = models.PositiveIntegerField(null=True, blank=True)  # anchor: last_active_at
    expires_at = models.DateTimeField(null=True, blank=True)
    last_active_at = models.DateTimeField(default=timezone.now)
    # {"type": "static", "static": {"max_chunk_size_tokens": n, "chunk_overlap_tokens": m}} or auto.
    chunking_strategy = models.JSONField(default=dict, blank=True)

    class Meta:
        # The reaper's expiry sweep reads only stores that can expire, oldest deadline first.
        indexes = [
            models.Index(
                fields=["expires_at"],
                condition=models.Q(expires_at__isnull=False),
                name="vector_store_expiring",
            )
        ]


class VectorStoreFileBatch(models.Model):
    """Files attached to a vector store in one request (``/v1/.../file_batches``)."""

    id = models.CharField(primary_key=True, max_length=40, default=_batch_id, editable=False)
    collection = models.ForeignKey("Collection", on_delete=models.CASCADE, related_name="file_batches")
    created_at = models.DateTimeField(default=timezone.now)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)


# Retrieval evaluation's tables live in their own room; Django reads them from here.
# Groups, grants and the access audit live in their own module; imported here so Django finds them.
from documents.access_models import AccessChange as AccessChange  # noqa: E402
from documents.access_models import DocumentGrant as DocumentGrant  # noqa: E402
from documents.access_models import WorkspaceGroup as WorkspaceGroup  # noqa: E402
from documents.evaluation.models import (  # noqa: E402, F401
    EvaluationResult,
    EvaluationRun,
    LabelCandidate,
    LabelledQuery,
    LabelledQuerySet,
    Verdict,
)
from documents.sources.models import Source, SourceItem, SourceSync  # noqa: E402, F401
