"""What the documents app's admin classes share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest

from documents.models import Tenant
from documents.visibility import staff_rows

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows created and changed by services only: the admin shows them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WorkspaceFilter(admin.RelatedFieldListFilter):
    """The sidebar's "by workspace" filter, listing only the workspaces whose rows the staff
    member may see (all with ``documents.view_all_documents``, else their own): the names of
    the others are not shown."""

    def field_choices(
        self, field: Any, request: HttpRequest, model_admin: Any
    ) -> list[tuple[str, _StrOrPromise]]:
        visible = staff_rows(request.user, Tenant.objects.all(), tenant="pk").order_by("name")
        return [(str(tenant.pk), str(tenant)) for tenant in visible]
