"""Read paths with permission checks: the only way the API and pages fetch documents and jobs.

``access_*`` functions answer ``None`` (the caller says 404) for ids that do not exist, for
ids of another tenant and for documents the caller's access lists do not allow alike, so a
caller cannot tell them apart. :func:`visible_documents` (``documents.visibility``) is the one
visibility rule: every read of documents on behalf of a person goes through it (search puts
the same keys into the index queries, ``documents.retrieval.backends.Scope.principals``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.functions import Lower

from documents.hot_reads import version_with_job
from documents.kinds.ingest import PIPELINE
from documents.models import Chunk, Document, DocumentVersion, LabelledQuery, Membership, Tenant
from documents.principals import Viewer
from documents.visibility import granted as _granted
from documents.visibility import seen_among as seen_among
from documents.visibility import viewer_for as viewer_for
from documents.visibility import visible_documents as visible_documents
from jobs.models import Status

# The combined words a document's state can show, from the job kind's own bundle.
STATE_WORDS = PIPELINE.state_words
_RUNNING_WORDS = {stage.name for stage in PIPELINE.stages}


_TENANT = "_documents_tenant"


def tenant_for(user: Any) -> Tenant | None:
    if user is None or not user.is_authenticated:
        return None
    if hasattr(user, _TENANT):  # found with the user by the token authentication
        return getattr(user, _TENANT)
    membership = Membership.objects.select_related("tenant").filter(user=user).first()
    return membership.tenant if membership else None


def remember_tenant(user: Any, tenant: Tenant | None) -> None:
    """Keep the tenant found with ``user`` on the user object (this request's only)."""
    setattr(user, _TENANT, tenant)


def hides_documents(viewer: Viewer, collection_id: Any) -> bool:
    """Whether the collection holds live documents the viewer may not see (then only a workspace
    admin may delete it: deleting it deletes them)."""
    if viewer.principals is None or viewer.is_admin:
        return False
    live = Document.objects.filter(tenant_id=viewer.tenant_id, collection_id=collection_id, deleted_at=None)
    return live.exclude(_granted(viewer.principals)).exists()


def hidden_from(viewer: Viewer, document_id: Any) -> bool:
    """Whether the tenant has that document (live or deleted, whose delete may be repeated) and
    the viewer may not see it: a delete then answers 404 as for an unknown id."""
    pk = _uuid(document_id)
    if pk is None or viewer.principals is None:
        return False
    found = Document.objects.filter(tenant_id=viewer.tenant_id, pk=pk)
    return found.exists() and not found.filter(_granted(viewer.principals)).exists()


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def access_document(viewer: Viewer, document_id: Any) -> Document | None:
    pk = _uuid(document_id)
    if pk is None:
        return None
    return (
        visible_documents(viewer)
        .select_related("published_version", "latest_version__job")
        .filter(pk=pk)
        .first()
    )


def access_document_to_manage(viewer: Viewer, document_id: Any) -> Document | None:
    """A document whose access list the viewer may read and set: one they see, or for a
    workspace admin any live document of the workspace (an admin may have to let themselves
    in, or repair a list that leaves everyone out)."""
    if viewer.is_admin:
        return access_document(viewer.seeing_all(), document_id)
    return access_document(viewer, document_id)


def access_version_by_job(viewer: Viewer, document_id: Any, job_id: Any) -> DocumentVersion | None:
    """The version whose job is ``job_id``, if that job belongs to ``document_id`` of the
    viewer's tenant and the viewer may see that document."""
    doc_pk, job_pk = _uuid(document_id), _uuid(job_id)
    if doc_pk is None or job_pk is None:
        return None
    # Every status poll makes this read: SQL built once per process, same conditions as
    # DocumentVersion.objects.select_related("job").filter(document__tenant=tenant,
    # document_id=..., job_id=..., deleted_at=None, document__deleted_at=None).
    # The access check is part of that one query (the caller's groups and permissions read
    # there, not before it): a status poll stays one query.
    return version_with_job(viewer.tenant_id, doc_pk, job_pk, visible_to=viewer)


def state_filter(word: str) -> Q:
    """Documents whose latest version's job is in the combined state ``word``."""
    prefix = "latest_version__job__"
    failed_at = PIPELINE.failed_stage(word)
    if failed_at is not None:
        return Q(**{f"{prefix}status": Status.FAILED, f"{prefix}stage": failed_at})
    if word in _RUNNING_WORDS:
        return Q(**{f"{prefix}status": Status.RUNNING, f"{prefix}stage": word})
    return Q(**{f"{prefix}status": word})


# The lists' sort orders (pages and API ``ordering``); the default puts recent activity first.
ORDERINGS: dict[str, tuple[Any, ...]] = {
    "-last_activity": ("-last_activity_at", "pk"),
    "last_activity": ("last_activity_at", "pk"),
    "title": (Lower("title"), "pk"),
    "-title": (Lower("title").desc(), "pk"),
    "-created": ("-created_at", "pk"),
    "created": ("created_at", "pk"),
}
DEFAULT_ORDERING = "-last_activity"


def documents_of(
    viewer: Viewer,
    *,
    state: str | None = None,
    q: str = "",
    ordering: str = DEFAULT_ORDERING,
    collection_ids: Sequence[Any] | None = None,
) -> QuerySet[Document]:
    """The documents the viewer may see, optionally in the combined ``state``, of
    ``collection_ids``, whose title contains ``q``, sorted by one of :data:`ORDERINGS`."""
    documents = visible_documents(viewer).select_related("published_version", "latest_version__job")
    if collection_ids is not None:  # another tenant's ids match nothing: the tenant filter holds
        documents = documents.filter(collection_id__in=list(collection_ids))
    if state:
        documents = documents.filter(state_filter(state))
    if q.strip():
        documents = documents.filter(title__icontains=q.strip())
    return documents.order_by(*ORDERINGS.get(ordering, ORDERINGS[DEFAULT_ORDERING]))


def access_version(viewer: Viewer, document_id: Any, number: Any) -> DocumentVersion | None:
    """Version ``number`` of the viewer's visible document ``document_id`` (not deleted)."""
    doc_pk = _uuid(document_id)
    if doc_pk is None or not str(number).isdigit():
        return None
    found = DocumentVersion.objects.select_related("job", "document__tenant").filter(
        document__in=visible_documents(viewer).filter(pk=doc_pk), number=int(number), deleted_at=None
    )
    return next(iter(found.order_by()[:1]), None)


def versions_of(document: Document) -> QuerySet[DocumentVersion]:
    return document.versions.filter(deleted_at=None).select_related("job").order_by("-number")


def queries_in_sight(viewer: Viewer, query_ids: Iterable[Any]) -> set[int]:
    """Of these labelled queries, those whose labels name only documents (or chunks of
    documents) the viewer may see. A query's text is often a document's title or summary: a
    per-query row about a document the viewer may not see would name it as surely as its id.
    Two queries, whatever the number of queries."""
    queries = dict(LabelledQuery.objects.filter(pk__in=list(query_ids)).values_list("pk", "labels"))
    if viewer.principals is None:
        return set(queries)
    named: dict[int, tuple[set[str], set[int]]] = {}
    for pk, labels in queries.items():
        keys = [str(key).split(":", 1) for key in labels or {}]
        named[pk] = (
            {value for kind, value in keys if kind == "document"},
            {int(value) for kind, value in keys if kind == "chunk" and value.isdigit()},
        )
    chunk_documents = dict(
        Chunk.objects.filter(pk__in={c for _, chunks in named.values() for c in chunks}).values_list(
            "pk", "version__document_id"
        )
    )
    wanted = {d for documents, _ in named.values() for d in documents} | set(chunk_documents.values())
    seen = {str(pk) for pk in seen_among(viewer, wanted)}
    return {
        pk
        for pk, (documents, chunks) in named.items()
        if documents <= seen and all(str(chunk_documents.get(c)) in seen for c in chunks)
    }
