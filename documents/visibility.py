"""The one visibility rule: which documents of a workspace a caller may see.

:func:`visible_documents` is what every read of documents on behalf of a person goes through
(``documents.selectors`` builds its ``access_*`` reads on it; search puts the same keys into the
index queries, ``documents.retrieval.backends.Scope.principals``). It imports models only, so
the services that decide who is told about a document (webhooks) can use it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth.models import Permission
from django.db.models import CharField, Exists, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Cast, Concat

from documents.models import Document, DocumentGrant, FileObject, Membership, Tenant, WorkspaceGroup
from documents.principals import EVERYONE, VIEW_ALL, Viewer, group_key, user_key


def viewer_for(user: Any, tenant: Tenant) -> Viewer:
    """``user`` as a caller in ``tenant``: the principal keys that name them there, whether they
    see every document (``documents.view_all_documents``) and whether they administer the
    workspace. Read anew on each call (a view keeps it for its request): a membership change
    takes effect on the next request."""

    def keys() -> tuple[str, ...]:
        groups = WorkspaceGroup.objects.filter(tenant=tenant, group__user=user).values_list("pk", flat=True)
        return (EVERYONE, user_key(user.pk), *sorted(group_key(g) for g in groups))

    def is_admin() -> bool:
        if user.is_superuser:
            return True
        return Membership.objects.filter(user=user, tenant=tenant, is_admin=True).exists()

    return Viewer(
        tenant_id=tenant.pk,
        user_id=user.pk,
        keys=keys,
        sees_all=lambda: bool(user.has_perm(VIEW_ALL)),
        is_admin=is_admin,
        is_superuser=bool(user.is_superuser),
    )


def visible_documents(viewer: Viewer) -> QuerySet[Document]:
    """The live documents of the viewer's workspace that the viewer may see: the only rule.

    For a caller whose groups and permissions are not read yet, they are read inside the query
    this set becomes part of (subqueries), not before it: a poll of one file stays one query."""
    return allowed(viewer, Document.objects.filter(tenant_id=viewer.tenant_id, deleted_at=None))


def allowed(viewer: Viewer, documents: QuerySet[Document]) -> QuerySet[Document]:
    """``documents`` (of the viewer's workspace) narrowed to those the viewer may see."""
    if viewer.sees_all_already:
        return documents
    if viewer.user_id is None or viewer.loaded:
        if viewer.principals is None:
            return documents
        return documents.filter(granted(viewer.principals))
    user_id = viewer.user_id
    group_keys = (
        WorkspaceGroup.objects.filter(tenant_id=viewer.tenant_id, group__user=user_id)
        .annotate(principal_key=Concat(Value("group:"), Cast("pk", output_field=CharField())))
        .values("principal_key")
    )
    grants = DocumentGrant.objects.filter(document_id=OuterRef("pk")).filter(
        Q(principal__in=[EVERYONE, user_key(user_id)]) | Q(principal__in=group_keys)
    )
    return documents.filter(Q(Exists(_view_all_of(user_id))) | Q(Exists(grants)))


def _view_all_of(user_id: int) -> QuerySet[Permission]:
    """The permission ``documents.view_all_documents`` if the user holds it (itself or by group)."""
    app_label, codename = VIEW_ALL.split(".")
    return Permission.objects.filter(codename=codename, content_type__app_label=app_label).filter(
        Q(user=user_id) | Q(group__user=user_id)
    )


def visible_files(viewer: Viewer) -> QuerySet[FileObject]:
    """The workspace's ``/v1`` file objects the viewer may see. A file object has no access list
    of its own: its bytes are its uploader's, and become what its documents allow. So: the ones
    the viewer uploaded, those a document the viewer may see was made from, and for those who
    see every document all of them. One query, read inside the caller's."""
    files = FileObject.objects.filter(tenant_id=viewer.tenant_id)
    if viewer.sees_all_already or viewer.user_id is None:
        return files if viewer.sees_all_already else files.none()
    made = visible_documents(viewer).filter(file_id=OuterRef("pk"))
    mine = Q(created_by_id=viewer.user_id) | Q(Exists(made))
    if viewer.loaded:
        return files if viewer.sees_all else files.filter(mine)
    return files.filter(mine | Q(Exists(_view_all_of(viewer.user_id))))


def seen_among(viewer: Viewer, document_ids: Iterable[Any]) -> set[uuid.UUID]:
    """Which of ``document_ids`` the viewer may see, live or deleted (a delete is told to those
    who saw the document until then): one query, the caller's groups and permission read in it."""
    ids = {pk for pk in (as_uuid(value) for value in document_ids) if pk is not None}
    if not ids:
        return set()
    found = allowed(viewer, Document.objects.filter(tenant_id=viewer.tenant_id, pk__in=ids))
    return set(found.values_list("pk", flat=True))


def granted(keys: Sequence[str]) -> Q:
    """A document (the outer row) granted to one of ``keys``."""
    return Q(Exists(DocumentGrant.objects.filter(document_id=OuterRef("pk"), principal__in=list(keys))))


def as_uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        return None


def staff_documents(user: Any, documents: QuerySet[Document]) -> QuerySet[Document]:
    """What the admin shows a staff member of ``documents`` (of any workspace, deleted ones
    too): every one with ``documents.view_all_documents`` (superusers have it); otherwise those
    of their own workspace that its access lists let them see, as anywhere else; none for staff
    of no workspace."""
    if staff_sees_all(user):
        return documents
    viewer = staff_viewer(user)
    if viewer is None:
        return documents.none()
    return allowed(viewer, documents.filter(tenant_id=viewer.tenant_id))


def staff_viewer(user: Any) -> Viewer | None:
    """A staff member as a caller in their own workspace; None for staff of no workspace."""
    membership = Membership.objects.select_related("tenant").filter(user=user).first()
    return None if membership is None else viewer_for(user, membership.tenant)


def staff_rows(user: Any, rows: QuerySet[Any], *, tenant: str = "tenant_id") -> QuerySet[Any]:
    """Of ``rows`` (each of one workspace, named by the field ``tenant``), what the admin's audit
    and operator pages show a staff member: all with ``documents.view_all_documents``, else
    their own workspace's, none for staff of no workspace. Rows that name a document are
    narrowed further with :func:`staff_hidden_documents` or :func:`staff_documents`."""
    if staff_sees_all(user):
        return rows
    viewer = staff_viewer(user)
    return rows.none() if viewer is None else rows.filter(**{tenant: viewer.tenant_id})


def staff_hidden_documents(user: Any) -> QuerySet[Document]:
    """The documents (deleted ones too) of the staff member's workspace that they may not see:
    rows naming one of them stay off their admin pages. Empty for those who see every document."""
    if staff_sees_all(user):
        return Document.objects.none()
    viewer = staff_viewer(user)
    if viewer is None:
        return Document.objects.none()
    mine = Document.objects.filter(tenant_id=viewer.tenant_id)
    return mine.exclude(pk__in=allowed(viewer, mine).values("pk"))


def staff_sees_all(user: Any) -> bool:
    return bool(user.is_superuser or user.has_perm(VIEW_ALL))
