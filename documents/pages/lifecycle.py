"""HTML pages of the lifecycle: deleting a document, with a confirmation page (works without
JavaScript; the form carries the CSRF token), and processing a cancelled or failed version
again. The same services as the API underneath."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from documents.engines.validation import UploadRejected
from documents.models import Tenant
from documents.pages.document import _see_other, tenant_required
from documents.selectors import access_document, access_version, viewer_for
from documents.services.delete import document_delete
from documents.services.process_again import version_process_again
from documents.texts import localize
from jobs.errors import JobConflict


@require_http_methods(["GET", "POST"])
@tenant_required
def document_delete_view(request: HttpRequest, tenant: Tenant, document_id: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes and goes back to the list."""
    document = access_document(viewer_for(request.user, tenant), document_id)
    if document is None:
        raise Http404
    if request.method == "GET":
        return render(request, "documents/delete_confirm.html", {"document": document})
    document_delete(tenant=tenant, document_id=document.pk, user=request.user, via="page")
    messages.success(
        request, _("“%(title)s” was deleted. It no longer appears in search.") % {"title": document.title}
    )
    return _see_other(reverse("documents"))


@require_POST
@tenant_required
def version_process_again_view(
    request: HttpRequest, tenant: Tenant, document_id: str, number: int
) -> HttpResponse:
    """Process a cancelled or failed version again (a new version from its stored bytes)."""
    version = access_version(viewer_for(request.user, tenant), document_id, number)
    if version is None:
        raise Http404
    try:
        result = version_process_again(version=version, user=request.user)
    except JobConflict as refused:
        messages.error(request, localize(refused.message))
    except UploadRejected as rejected:  # the workspace's queue is full
        messages.error(request, localize(rejected.message))
    else:
        messages.success(
            request,
            _("Processing again as version %(number)s, from the file you uploaded.")
            % {"number": result.version.number},
        )
    return _see_other(reverse("document", args=[version.document_id]))
