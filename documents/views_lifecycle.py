"""HTML pages of the lifecycle: deleting a document, with a confirmation page (works without
JavaScript; the form carries the CSRF token). The same service as the API underneath."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from documents.models import Tenant
from documents.selectors import access_document
from documents.services.delete import document_delete
from documents.views import _see_other, tenant_required


@require_http_methods(["GET", "POST"])
@tenant_required
def document_delete_view(request: HttpRequest, tenant: Tenant, document_id: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes and goes back to the list."""
    document = access_document(tenant, document_id)
    if document is None:
        raise Http404
    if request.method == "GET":
        return render(request, "documents/delete_confirm.html", {"document": document})
    document_delete(tenant=tenant, document_id=document.pk, user=request.user, via="page")
    messages.success(
        request, _("“%(title)s” was deleted. It no longer appears in search.") % {"title": document.title}
    )
    return _see_other(reverse("documents"))
