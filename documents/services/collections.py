"""Collections (knowledge bases): create, update, delete, the tenant's default one, and the
counts shown per collection.

Every document belongs to one collection of its tenant. A tenant's default collection is made on
first need (uploads that name none go there), so tenants created before or after the migration
behave alike. Names are not unique (as OpenAI's vector stores): the id is the handle.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, F, QuerySet
from django.utils.translation import gettext_noop

from documents.models import Chunk, Collection, Document, Tenant
from documents.texts import Text
from jobs.models import Status

DEFAULT_NAME = "Default"
MAX_NAME = 256
MAX_DESCRIPTION = 2000
MAX_METADATA_KEYS = 16  # the /v1 facade's vector-store metadata: 16 pairs, as OpenAI allows
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512

# A document's state, read from its latest version's job (the one a user waits for).
STATE_OF_STATUS: dict[str, str] = {
    Status.QUEUED: "queued",
    Status.RUNNING: "in_progress",
    Status.CANCEL_REQUESTED: "in_progress",
    Status.STALLED: "in_progress",
    Status.READY: "ready",
    Status.FAILED: "failed",
    Status.CANCELLED: "cancelled",
}
STATES = ("queued", "in_progress", "ready", "failed", "cancelled")


class CollectionInputError(Exception):
    """A bad name, description or metadata: ``code`` and a user-safe ``message`` naming ``field``."""

    def __init__(self, code: str, message: str, field: str) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise CollectionInputError("invalid_name", gettext_noop("A collection needs a name."), "name")
    name = name.strip()
    if len(name) > MAX_NAME or "\x00" in name:
        message = Text(gettext_noop("The name must be at most %(count)s characters."), count=MAX_NAME)
        raise CollectionInputError("invalid_name", message, "name")
    return name


def _check_description(description: Any) -> str:
    if description is None:
        return ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION or "\x00" in description:
        raise CollectionInputError(
            "invalid_description",
            Text(
                gettext_noop("The description must be text of at most %(count)s characters."),
                count=MAX_DESCRIPTION,
            ),
            "description",
        )
    return description


def _check_metadata(metadata: Any) -> dict[str, str]:
    if metadata is None:
        return {}
    ok = isinstance(metadata, dict) and len(metadata) <= MAX_METADATA_KEYS
    ok = ok and all(
        isinstance(k, str)
        and isinstance(v, str)
        and 0 < len(k) <= MAX_METADATA_KEY
        and len(v) <= MAX_METADATA_VALUE
        for k, v in metadata.items()
    )
    if not ok:
        raise CollectionInputError(
            "invalid_metadata",
            Text(
                gettext_noop(
                    "Metadata is at most %(pairs)s pairs of text keys (up to %(key)s characters) and "
                    "text values (up to %(value)s)."
                ),
                pairs=MAX_METADATA_KEYS,
                key=MAX_METADATA_KEY,
                value=MAX_METADATA_VALUE,
            ),
            "metadata",
        )
    return dict(metadata)


def default_collection(tenant: Tenant, *, lock: bool = False) -> Collection:
    """The tenant's default collection, made on first need (race-safe: one per tenant).

    With ``lock`` (inside a transaction), its row is locked until the transaction ends, as
    :func:`documents.services.access.grants_for_new_document` needs it: one read, not two.
    """
    rows = Collection.objects.select_for_update() if lock else Collection.objects.all()
    found = rows.filter(tenant=tenant, is_default=True).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return Collection.objects.create(
                tenant=tenant,
                name=DEFAULT_NAME,
                description="Documents uploaded without a collection.",
                is_default=True,
            )
    except IntegrityError:  # another request made it first (collection_one_default)
        return rows.get(tenant=tenant, is_default=True)


def collection_of(tenant: Tenant, collection_id: Any) -> Collection | None:
    """The tenant's collection with that id, or ``None`` (unknown, malformed or another tenant's)."""
    try:
        pk = uuid.UUID(str(collection_id))
    except (TypeError, ValueError):
        return None
    return Collection.objects.filter(tenant=tenant, pk=pk).first()


def collections_of(tenant: Tenant) -> QuerySet[Collection]:
    return Collection.objects.filter(tenant=tenant).order_by("-is_default", "-created_at")


def _check_weights(text: Any, embedding: Any) -> tuple[float, float]:
    """Hybrid search's weights: numbers from 0 to 1, not both 0 (``documents.retrieval.fusion``)."""
    for value, field_name in ((text, "text_weight"), (embedding, "embedding_weight")):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            message = gettext_noop("A weight is a number from 0 to 1.")
            raise CollectionInputError("invalid_weight", message, field_name)
    if text == 0 and embedding == 0:
        message = gettext_noop("At least one of text_weight and embedding_weight must be above 0.")
        raise CollectionInputError("invalid_weight", message, "embedding_weight")
    return float(text), float(embedding)


def collection_create(
    *,
    tenant: Tenant,
    name: Any,
    description: Any = "",
    metadata: Any = None,
    text_weight: Any = 1.0,
    embedding_weight: Any = 1.0,
) -> Collection:
    """Create a collection (:class:`CollectionInputError` for a bad field; nothing stored then)."""
    text_weight, embedding_weight = _check_weights(text_weight, embedding_weight)
    return Collection.objects.create(
        tenant=tenant,
        name=_check_name(name),
        description=_check_description(description),
        metadata=_check_metadata(metadata),
        text_weight=text_weight,
        embedding_weight=embedding_weight,
    )


_UNSET: Any = object()


def collection_update(
    *,
    collection: Collection,
    name: Any = _UNSET,
    description: Any = _UNSET,
    metadata: Any = _UNSET,
    text_weight: Any = _UNSET,
    embedding_weight: Any = _UNSET,
) -> Collection:
    """Change the given fields only (metadata is replaced whole, as OpenAI's modify does)."""
    changes: dict[str, Any] = {}
    if text_weight is not _UNSET or embedding_weight is not _UNSET:
        changes["text_weight"], changes["embedding_weight"] = _check_weights(
            collection.text_weight if text_weight is _UNSET else text_weight,
            collection.embedding_weight if embedding_weight is _UNSET else embedding_weight,
        )
    if name is not _UNSET:
        changes["name"] = _check_name(name)
    if description is not _UNSET:
        changes["description"] = _check_description(description)
    if metadata is not _UNSET:
        changes["metadata"] = _check_metadata(metadata)
    if changes:
        Collection.objects.filter(pk=collection.pk).update(**changes)
        for key, value in changes.items():
            setattr(collection, key, value)
    return collection


def collection_delete(*, collection: Collection, user: Any = None, via: str = "api") -> int:
    """Delete a collection: each of its documents through the delete service (job cancelled,
    files and derived rows cleaned, audit record kept), then the collection. Returns how many
    documents it deleted. The default collection can be deleted too; the next upload without a
    collection makes a new one.
    """
    from documents.services.delete import document_delete  # delete imports upload's neighbours

    tenant = collection.tenant
    deleted = 0
    live = Document.objects.filter(collection=collection, deleted_at=None)
    for document_id in list(live.values_list("pk", flat=True)):
        if document_delete(tenant=tenant, document_id=document_id, user=user, via=via) is not None:
            deleted += 1
    with transaction.atomic():
        # Tombstones still waiting for their cleanup keep their rows a little longer; they leave
        # the collection for the default one so the collection row can go (PROTECT).
        waiting = Document.objects.filter(collection=collection)
        if waiting.exists():
            fallback = default_collection(tenant)
            if fallback.pk == collection.pk:
                Collection.objects.filter(pk=collection.pk).update(is_default=False)
                fallback = default_collection(tenant)
            waiting.update(collection=fallback)
        Collection.objects.filter(pk=collection.pk).delete()
    return deleted


@dataclass
class CollectionCounts:
    documents: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*STATES, "total"), 0))
    chunks: int = 0


def collection_counts(
    collections: list[Collection], visible: QuerySet[Document] | None = None
) -> dict[Any, CollectionCounts]:
    """Documents by state and published chunks per collection, in two queries whatever the
    number of collections or documents; with ``visible`` (``selectors.visible_documents``) only
    the documents the caller may see count."""
    ids = [c.pk for c in collections]
    counts = {pk: CollectionCounts() for pk in ids}
    documents = Document.objects.all() if visible is None else visible
    by_state = (
        documents.filter(collection_id__in=ids, deleted_at=None)
        .values("collection_id", "latest_version__job__status")
        .annotate(n=Count("pk"))
    )
    for row in by_state:
        state = STATE_OF_STATUS.get(row["latest_version__job__status"], "queued")
        entry = counts[row["collection_id"]]
        entry.documents[state] += row["n"]
        entry.documents["total"] += row["n"]
    chunks_of = Chunk.objects.all()
    if visible is not None:
        chunks_of = chunks_of.filter(version__document__in=visible.values("pk"))
    chunks = (
        chunks_of.filter(
            version__document__collection_id__in=ids,
            version__document__deleted_at=None,
            version__document__published_version_id=F("version_id"),
        )
        .values("version__document__collection_id")
        .annotate(n=Count("pk"))
    )
    for chunk_row in chunks:
        counts[chunk_row["version__document__collection_id"]].chunks = chunk_row["n"]
    return counts
