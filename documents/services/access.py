"""Access lists: read, check and set a collection's or a document's, and keep each document's
grants (``DocumentGrant``) equal to the list in force.

Rules (docs/permissions.md):

- A collection's list is its documents' default; a document inherits it (``access`` NULL) or has
  its own. The grants of a document are the keys of the list in force, so a change of a
  collection's list rewrites the grant rows of its inheriting documents (one small row set per
  document, never a chunk or a vector) in the same transaction as the list itself.
- Workspace admins (and superusers) change any list; a document's creator changes that
  document's. Everyone else gets 403 for a document they may see (404 for one they may not).
- Every change appends an ``AccessChange`` (who, when, what, from, to) in the same transaction.
  Access changes always commit durably (the database's default; nothing here relaxes it).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from documents.models import (
    AccessChange,
    Collection,
    Document,
    DocumentGrant,
    Membership,
    Tenant,
    WorkspaceGroup,
)
from documents.principals import Viewer, parse_key
from documents.texts import Text, gettext_noop

MAX_PRINCIPALS = 100
MAX_BULK_DOCUMENTS = 1000


class AccessInputError(Exception):
    """A refused access list or request: ``code``, a user-safe ``message``, the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400, field: str = "principals") -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.field = code, message, status, field


@dataclass(frozen=True)
class AccessList:
    inherit: bool
    principals: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"inherit": self.inherit, "principals": list(self.principals)}


def collection_access(collection: Collection) -> AccessList:
    return AccessList(inherit=False, principals=list(collection.access or []))


def document_access(document: Document, collection: Collection | None = None) -> AccessList:
    """The document's list as set (``inherit``) and the principals in force."""
    if document.access is None:
        return AccessList(inherit=True, principals=list((collection or document.collection).access or []))
    return AccessList(inherit=False, principals=list(document.access))


def check_principals(tenant: Tenant, raw: Any) -> list[str]:
    """The principal keys of ``raw`` (a list of ``everyone``, ``user:<id>``, ``group:<id>``),
    each naming this workspace's everyone, one of its members or one of its groups; sorted,
    without repeats. Raises :class:`AccessInputError` naming the first bad one."""
    if not isinstance(raw, list):
        raise AccessInputError(
            "invalid_principals", gettext_noop("principals must be a list of principal keys.")
        )
    if len(raw) > MAX_PRINCIPALS:
        message = Text(
            gettext_noop("An access list holds at most %(count)s principals."), count=MAX_PRINCIPALS
        )
        raise AccessInputError("too_many_principals", message)
    users: set[int] = set()
    groups: set[int] = set()
    keys: set[str] = set()
    for value in raw:
        parsed = parse_key(value)
        if parsed is None:
            message = Text(
                gettext_noop("Unknown principal %(value)s: use everyone, user:<id> or group:<id>."),
                value=str(value)[:60],
            )
            raise AccessInputError("invalid_principal", message)
        kind, pk = parsed
        if kind == "user" and pk is not None:
            users.add(pk)
        elif kind == "group" and pk is not None:
            groups.add(pk)
        keys.add(str(value))
    members = set(
        Membership.objects.filter(tenant=tenant, user_id__in=users).values_list("user_id", flat=True)
    )
    for pk in sorted(users - members):
        message = Text(gettext_noop("No member user:%(id)s in this workspace."), id=pk)
        raise AccessInputError("unknown_principal", message)
    own = set(WorkspaceGroup.objects.filter(tenant=tenant, pk__in=groups).values_list("pk", flat=True))
    for pk in sorted(groups - own):
        message = Text(gettext_noop("No group group:%(id)s in this workspace."), id=pk)
        raise AccessInputError("unknown_principal", message)
    return sorted(keys)


def may_change_document(viewer: Viewer, document: Document) -> bool:
    return viewer.is_admin or (viewer.user_id is not None and document.created_by_id == viewer.user_id)


def _write_grants(documents: Iterable[tuple[uuid.UUID, Sequence[str]]], *, replace: bool = True) -> None:
    """Replace the grants of each ``(document id, keys)``: one delete and one insert per batch
    (without ``replace``, documents that have none yet: the insert alone)."""
    rows = list(documents)
    for start in range(0, len(rows), 500):
        part = rows[start : start + 500]
        if replace:
            DocumentGrant.objects.filter(document_id__in=[pk for pk, _ in part]).delete()
        DocumentGrant.objects.bulk_create(
            [DocumentGrant(document_id=pk, principal=key) for pk, keys in part for key in keys]
        )


def grants_for_new_document(document: Document, *, locked: Collection | None = None) -> None:
    """The grants of a document just made, inside its creating transaction. Its collection's
    row is locked first, so a concurrent change of the collection's list either comes before
    (its list is read here) or waits for this commit (and rewrites these grants). ``locked`` is
    the document's collection when the caller has already read it under that lock."""
    collection = locked
    if collection is None:
        collection = Collection.objects.select_for_update().only("access").get(pk=document.collection_id)
    # A row made in this transaction has no grants yet: nothing to delete first.
    _write_grants([(document.pk, document_access(document, collection).principals)], replace=False)


def _audit(
    tenant_id: int,
    user: Any,
    subject_type: str,
    subject_id: Any,
    name: str,
    before: AccessList,
    after: AccessList,
) -> AccessChange:
    owner = user if isinstance(user, get_user_model()) else None
    return AccessChange(
        tenant_id=tenant_id,
        changed_by=owner,
        changed_by_name=(owner.get_username() if owner is not None else "")[:150],
        subject_type=subject_type,
        subject_id=str(subject_id),
        subject_name=name[:300],
        before=before.as_dict(),
        after=after.as_dict(),
    )


def collection_access_set(
    *, viewer: Viewer, collection: Collection, principals: Any, user: Any
) -> AccessList:
    """Set the collection's default list (workspace admins only). Its inheriting documents'
    grants change in the same commit; nothing is re-embedded."""
    if not viewer.is_admin:
        raise AccessInputError(
            "not_allowed",
            gettext_noop("Only workspace admins change a collection's access."),
            403,
            "collection",
        )
    keys = check_principals(collection.tenant, principals)
    with transaction.atomic():
        # Locks the collection: two concurrent changes apply one after the other, and a
        # document's own-list change (which locks its collection too) cannot interleave.
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        before = collection_access(locked)
        if before.principals == keys:
            return before
        Collection.objects.filter(pk=locked.pk).update(access=keys)
        inheriting = Document.objects.filter(collection=locked, access__isnull=True).values_list(
            "pk", flat=True
        )
        _write_grants((pk, keys) for pk in inheriting.iterator())
        after = AccessList(inherit=False, principals=keys)
        _audit(locked.tenant_id, user, "collection", locked.pk, locked.name, before, after).save()
    collection.access = keys
    return after


def documents_access_set(
    *, viewer: Viewer, documents: Sequence[Document], inherit: Any, principals: Any, user: Any
) -> dict[uuid.UUID, AccessList]:
    """Set the list of each document (its own ``principals``, or ``inherit`` its collection's),
    all or none. Each must be one the caller may change."""
    if not isinstance(inherit, bool):
        raise AccessInputError(
            "invalid_inherit", gettext_noop("inherit must be true or false."), field="inherit"
        )
    if inherit and principals not in (None, []):
        raise AccessInputError(
            "invalid_principals", gettext_noop("Send principals only when inherit is false.")
        )
    if len(documents) > MAX_BULK_DOCUMENTS:
        message = Text(gettext_noop("At most %(count)s documents per call."), count=MAX_BULK_DOCUMENTS)
        raise AccessInputError("too_many_documents", message, field="document_ids")
    tenant_ids = {d.tenant_id for d in documents}
    if len(tenant_ids) > 1 or tenant_ids - {viewer.tenant_id}:
        raise ValueError("documents of another tenant")
    for document in documents:
        if not may_change_document(viewer, document):
            message = Text(
                gettext_noop("Only the document's creator or a workspace admin changes its access (%(id)s)."),
                id=str(document.pk),
            )
            raise AccessInputError("not_allowed", message, 403, "document_ids")
    keys = None if inherit else check_principals(documents[0].tenant, principals) if documents else []
    results: dict[uuid.UUID, AccessList] = {}
    with transaction.atomic():
        # Collections first, then documents, in id order (collection_access_set's order): a
        # concurrent collection change waits, so no inheriting document misses its grants.
        collection_ids = sorted({d.collection_id for d in documents})
        collections = Collection.objects.select_for_update().in_bulk(collection_ids)
        locked = Document.objects.select_for_update().filter(pk__in=[d.pk for d in documents]).order_by("pk")
        changes: list[AccessChange] = []
        grants: list[tuple[uuid.UUID, list[str]]] = []
        for document in locked:
            collection = collections[document.collection_id]
            before = document_access(document, collection)
            document.access = keys
            after = document_access(document, collection)
            results[document.pk] = after
            if before == after:
                continue
            grants.append((document.pk, after.principals))
            changes.append(
                _audit(document.tenant_id, user, "document", document.pk, document.title, before, after)
            )
        if keys is None:
            Document.objects.filter(pk__in=[pk for pk, _ in grants]).update(access=None)
        else:
            Document.objects.filter(pk__in=[pk for pk, _ in grants]).update(access=keys)
        _write_grants(grants)
        AccessChange.objects.bulk_create(changes)
    return results


def document_access_set(
    *, viewer: Viewer, document: Document, inherit: Any, principals: Any, user: Any
) -> AccessList:
    """Set one document's list (see :func:`documents_access_set`)."""
    results = documents_access_set(
        viewer=viewer, documents=[document], inherit=inherit, principals=principals, user=user
    )
    return results[document.pk]


def forget_principal(tenant: Tenant, key: str) -> None:
    """Remove ``key`` (a deleted group) from every list of the workspace and the grants of the
    documents it was in force for; inside the caller's transaction."""
    for collection in Collection.objects.select_for_update().filter(tenant=tenant).order_by("pk"):
        if key in (collection.access or []):
            Collection.objects.filter(pk=collection.pk).update(
                access=[k for k in collection.access if k != key]
            )
    for document in (
        Document.objects.select_for_update().filter(tenant=tenant, access__isnull=False).order_by("pk")
    ):
        if key in (document.access or []):
            Document.objects.filter(pk=document.pk).update(
                access=[k for k in document.access or [] if k != key]
            )
    DocumentGrant.objects.filter(principal=key, document__tenant=tenant).delete()
