"""The admin's pages for access: workspace groups (managed through the group services), the
workspace-admin flag of memberships, and the read-only audit of access changes. Imported by
``documents.admin``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from documents.admin_base import ReadOnlyAdmin, WorkspaceFilter
from documents.models import AccessChange, Document, Membership, Tenant, WorkspaceGroup
from documents.principals import Viewer
from documents.services.access import AccessInputError
from documents.services.groups import (
    group_create,
    group_delete,
    group_member_add,
    group_member_remove,
    group_members,
    group_rename,
    membership_set_admin,
)
from documents.texts import localize
from documents.visibility import staff_documents, staff_rows, staff_sees_all


def _operator(request: HttpRequest, tenant: Tenant) -> Viewer:
    # The admin's own permissions (add/change/delete workspace group) already let this staff
    # member in; the services see them as an admin of the group's workspace.
    return Viewer(tenant_id=tenant.pk, user_id=request.user.pk, keys=(), is_admin=True)


class WorkspaceGroupForm(forms.ModelForm):
    members = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(), required=False, label=_("members")
    )

    class Meta:
        model = WorkspaceGroup
        fields = ("tenant", "name")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        users = get_user_model().objects.filter(memberships__isnull=False).order_by("username")
        if self.instance.pk:
            users = users.filter(memberships__tenant_id=self.instance.tenant_id)
            self.fields["tenant"].disabled = True
            self.initial["members"] = [u.pk for u in group_members(self.instance)]
        self.fields["members"].queryset = users  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant = data.get("tenant") or (self.instance.tenant if self.instance.pk else None)
        for user in data.get("members") or []:
            if tenant is not None and not Membership.objects.filter(user=user, tenant=tenant).exists():
                raise ValidationError(_("%(user)s is not a member of this workspace.") % {"user": user})
        return data

    def validate_unique(self) -> None:
        pass  # the service answers a taken name (save_model)


@admin.register(WorkspaceGroup)
class WorkspaceGroupAdmin(admin.ModelAdmin):
    """Groups of a workspace; every change goes through ``documents.services.groups``."""

    form = WorkspaceGroupForm
    list_display = ("name", "tenant", "member_count", "created_at")
    list_filter = (("tenant", WorkspaceFilter),)
    list_select_related = ("tenant",)
    search_fields = ("name", "tenant__slug")

    @admin.display(description=_("members"))
    def member_count(self, group: WorkspaceGroup) -> int:
        return len(group_members(group))

    def save_model(self, request: HttpRequest, obj: WorkspaceGroup, form: Any, change: bool) -> None:
        tenant = obj.tenant
        viewer = _operator(request, tenant)
        try:
            if change:
                group = group_rename(
                    viewer=viewer, group=WorkspaceGroup.objects.get(pk=obj.pk), name=obj.name
                )
            else:
                group = group_create(viewer=viewer, tenant=tenant, name=obj.name)
        except AccessInputError as exc:
            messages.error(request, localize(exc.message))
            raise ValidationError(localize(exc.message)) from None
        obj.pk = group.pk
        obj.group_id = group.pk
        wanted = {u.pk for u in form.cleaned_data.get("members") or []}
        present = {u.pk for u in group_members(group)}
        for user_id in sorted(wanted - present):
            group_member_add(viewer=viewer, group=group, user_id=user_id)
        for user_id in sorted(present - wanted):
            group_member_remove(viewer=viewer, group=group, user_id=user_id)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        pass  # members are saved by save_model through the services

    def delete_model(self, request: HttpRequest, obj: WorkspaceGroup) -> None:
        group_delete(viewer=_operator(request, obj.tenant), group=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WorkspaceGroup]) -> None:
        for group in queryset.select_related("tenant"):
            self.delete_model(request, group)


@admin.action(description=_("Make workspace admins"))
def make_admins(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
    for membership in queryset:
        membership_set_admin(membership=membership, is_admin=True)


@admin.action(description=_("Remove workspace admin rights"))
def remove_admins(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
    for membership in queryset:
        membership_set_admin(membership=membership, is_admin=False)


@admin.register(AccessChange)
class AccessChangeAdmin(ReadOnlyAdmin):
    """Who changed which list, when, from what to what: read only."""

    list_display = (
        "changed_at",
        "changed_by_name",
        "tenant",
        "subject_type",
        "subject_name",
        "before",
        "after",
    )
    list_filter = (("tenant", WorkspaceFilter), "subject_type")
    list_select_related = ("tenant",)
    search_fields = ("=subject_id", "subject_name", "changed_by_name")
    date_hierarchy = "changed_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[AccessChange]:
        changes = staff_rows(request.user, super().get_queryset(request))
        if staff_sees_all(request.user):
            return changes
        # A document's change names it (its title): shown only while the member may see it, so
        # not once it is gone. Collections are seen by every member.
        seen = staff_documents(request.user, Document.objects.all()).values_list("pk", flat=True)
        return changes.filter(
            Q(subject_type="collection") | Q(subject_type="document", subject_id__in=[str(pk) for pk in seen])
        )
