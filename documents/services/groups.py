"""A workspace's groups and their members (workspace admins only; see docs/permissions.md).

A group is Django's ``auth.Group`` tied to one workspace (``WorkspaceGroup``); its members are
that group's users, each a member of the workspace. Adding or removing a member changes what
they find on their next request: grants name the group, not its members, so no document's
grants change. Deleting a group removes it from every access list of the workspace.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from documents.models import Membership, Tenant, WorkspaceGroup
from documents.principals import Viewer, group_key
from documents.services.access import AccessInputError, forget_principal
from documents.texts import Text, gettext_noop

MAX_NAME = 80


def _check_admin(viewer: Viewer) -> None:
    if not viewer.is_admin:
        raise AccessInputError(
            "not_allowed", gettext_noop("Only workspace admins manage groups."), 403, "group"
        )


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise AccessInputError("invalid_name", gettext_noop("A group needs a name."), field="name")
    name = name.strip()
    if len(name) > MAX_NAME:
        message = Text(gettext_noop("The name must be at most %(count)s characters."), count=MAX_NAME)
        raise AccessInputError("invalid_name", message, field="name")
    return name


def _auth_name(tenant: Tenant, name: str) -> str:
    # auth.Group names are unique across the site; a slug holds no ":" so this pair is unique.
    return f"{tenant.slug}:{name}"


def _taken() -> AccessInputError:
    return AccessInputError(
        "name_taken", gettext_noop("The workspace already has a group of that name."), 409, "name"
    )


def groups_of(tenant: Tenant) -> QuerySet[WorkspaceGroup]:
    return WorkspaceGroup.objects.filter(tenant=tenant).order_by("name", "pk")


def group_of(tenant: Tenant, group_id: Any) -> WorkspaceGroup | None:
    if not str(group_id).isdigit():
        return None
    return WorkspaceGroup.objects.filter(tenant=tenant, pk=int(str(group_id))).first()


def group_members(group: WorkspaceGroup) -> list[Any]:
    return list(get_user_model().objects.filter(groups=group.group_id).order_by("pk"))


def group_create(*, viewer: Viewer, tenant: Tenant, name: Any) -> WorkspaceGroup:
    """A new group of the workspace, without members."""
    _check_admin(viewer)
    checked = _check_name(name)
    try:
        with transaction.atomic():
            auth_group = Group.objects.create(name=_auth_name(tenant, checked))
            return WorkspaceGroup.objects.create(group=auth_group, tenant=tenant, name=checked)
    except IntegrityError:
        raise _taken() from None


def group_rename(*, viewer: Viewer, group: WorkspaceGroup, name: Any) -> WorkspaceGroup:
    _check_admin(viewer)
    checked = _check_name(name)
    try:
        with transaction.atomic():
            WorkspaceGroup.objects.filter(pk=group.pk).update(name=checked)
            Group.objects.filter(pk=group.pk).update(name=_auth_name(group.tenant, checked))
    except IntegrityError:
        raise _taken() from None
    group.name = checked
    return group


def group_delete(*, viewer: Viewer, group: WorkspaceGroup) -> None:
    """Delete the group; it leaves every access list of the workspace in the same commit."""
    _check_admin(viewer)
    with transaction.atomic():
        forget_principal(group.tenant, group_key(group.pk))
        Group.objects.filter(pk=group.pk).delete()  # cascades to the WorkspaceGroup


def _member(tenant: Tenant, user_id: Any) -> Any:
    user = None
    if isinstance(user_id, int) and not isinstance(user_id, bool):
        user = get_user_model().objects.filter(pk=user_id, memberships__tenant=tenant).first()
    if user is None:
        message = Text(gettext_noop("No member user:%(id)s in this workspace."), id=str(user_id)[:40])
        raise AccessInputError("unknown_user", message, field="user_id")
    return user


def group_member_add(*, viewer: Viewer, group: WorkspaceGroup, user_id: Any) -> None:
    """Add a member of the workspace to the group (no change if already in it)."""
    _check_admin(viewer)
    _member(group.tenant, user_id).groups.add(group.group_id)


def group_member_remove(*, viewer: Viewer, group: WorkspaceGroup, user_id: Any) -> None:
    _check_admin(viewer)
    _member(group.tenant, user_id).groups.remove(group.group_id)


def membership_set_admin(*, membership: Membership, is_admin: bool) -> None:
    """Make a member a workspace admin (manages groups and every access list) or not."""
    Membership.objects.filter(pk=membership.pk).update(is_admin=is_admin)
