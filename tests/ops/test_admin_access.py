"""Operators manage a workspace's groups and its admins in the admin (through the services), and
read the audit of access changes, which nobody can add, change or delete there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from documents.models import AccessChange, Membership, WorkspaceGroup
from documents.services.accounts import user_create_in_tenant
from documents.services.groups import group_members
from tests.ops.conftest import login, make_staff

pytestmark = pytest.mark.django_db


def staff(*codenames: str) -> Client:
    return login(make_staff("cora", *codenames, app="documents"))


def test_an_operator_makes_a_group_with_members_renames_and_deletes_it():
    user_create_in_tenant(username="ann", tenant_slug="acme")
    user_create_in_tenant(username="zed", tenant_slug="globex")
    ann, zed = User.objects.get(username="ann"), User.objects.get(username="zed")
    acme = Membership.objects.get(user=ann).tenant
    client = staff(
        "view_workspacegroup", "add_workspacegroup", "change_workspacegroup", "delete_workspacegroup"
    )

    # A member of another workspace is refused, and nothing is made.
    refused = client.post(
        "/admin/documents/workspacegroup/add/", {"tenant": acme.pk, "name": "HR", "members": [zed.pk]}
    )
    assert refused.status_code == 200 and not WorkspaceGroup.objects.exists()
    made = client.post(
        "/admin/documents/workspacegroup/add/", {"tenant": acme.pk, "name": "HR", "members": [ann.pk]}
    )
    assert made.status_code == 302, made.content[:2000]
    group = WorkspaceGroup.objects.get()
    assert (group.name, group.group.name, [u.pk for u in group_members(group)]) == ("HR", "acme:HR", [ann.pk])

    renamed = client.post(
        f"/admin/documents/workspacegroup/{group.pk}/change/", {"name": "People", "members": []}
    )
    assert renamed.status_code == 302, renamed.content[:2000]
    group.refresh_from_db()
    assert (group.name, group_members(group)) == ("People", [])
    deleted = client.post(f"/admin/documents/workspacegroup/{group.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert not WorkspaceGroup.objects.exists()


def test_an_operator_makes_a_member_a_workspace_admin():
    user_create_in_tenant(username="ann", tenant_slug="acme")
    membership = Membership.objects.get(user__username="ann")
    client = staff("view_membership", "change_membership")
    answer = client.post(
        "/admin/documents/membership/", {"action": "make_admins", "_selected_action": [membership.pk]}
    )
    assert answer.status_code == 302
    membership.refresh_from_db()
    assert membership.is_admin


def test_the_access_audit_is_read_only():
    client = staff("view_accesschange", "add_accesschange", "change_accesschange", "delete_accesschange")
    assert client.get("/admin/documents/accesschange/").status_code == 200
    assert client.get("/admin/documents/accesschange/add/").status_code == 403
    assert not AccessChange.objects.exists()
