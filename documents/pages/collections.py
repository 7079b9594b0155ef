"""HTML pages for collections (list with counts, one collection's documents) and the inspection
of a version's chunks. The same services and selectors as the API underneath."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from documents.inspection import chunk_views, chunks_of, version_of
from documents.models import Tenant
from documents.pages.document import _see_other, _status_of, tenant_required
from documents.pages.document_list import DOCUMENTS_PER_PAGE
from documents.selectors import access_document, documents_of, viewer_for, visible_documents
from documents.services.collections import (
    CollectionInputError,
    collection_counts,
    collection_create,
    collection_of,
    collections_of,
)
from documents.texts import localize

CHUNKS_PER_PAGE = 20


@require_http_methods(["GET", "POST"])
@tenant_required
def collection_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """The tenant's collections with their counts; POST creates one (name, description)."""
    error, http_status = "", 200
    if request.method == "POST":
        try:
            made = collection_create(
                tenant=tenant,
                name=request.POST.get("name", ""),
                description=request.POST.get("description", ""),
            )
        except CollectionInputError as exc:
            error, http_status = localize(exc.message), 400
        else:
            messages.success(request, _("Collection created."))
            return _see_other(reverse("collection", args=[made.pk]))
    collections = list(collections_of(tenant))
    counts = collection_counts(collections, visible_documents(viewer_for(request.user, tenant)))
    rows = [{"collection": c, "counts": counts[c.pk]} for c in collections]
    context = {"rows": rows, "error": error, "name": request.POST.get("name", "")}
    return render(request, "documents/collections.html", context, status=http_status)


@require_GET
@tenant_required
def collection_detail(request: HttpRequest, tenant: Tenant, collection_id: str) -> HttpResponse:
    """One collection: its counts and its documents (another tenant's: 404)."""
    collection = collection_of(tenant, collection_id)
    if collection is None:
        raise Http404
    counts = collection_counts([collection], visible_documents(viewer_for(request.user, tenant)))[
        collection.pk
    ]
    documents = documents_of(viewer_for(request.user, tenant), collection_ids=[collection.pk])
    page = Paginator(documents, DOCUMENTS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [{"document": d, "status": _status_of(d.latest_version)} for d in page]
    context = {"collection": collection, "counts": counts, "page": page, "rows": rows}
    return render(request, "documents/collection.html", context)


@require_GET
@tenant_required
def version_chunks(request: HttpRequest, tenant: Tenant, document_id: str, number: str) -> HttpResponse:
    """A version's chunks as search reads them: text, pages, headings, the OCR engine."""
    document = access_document(viewer_for(request.user, tenant), document_id)
    version = version_of(document, number) if document is not None else None
    if document is None or version is None:
        raise Http404
    page = Paginator(chunks_of(version), CHUNKS_PER_PAGE).get_page(request.GET.get("page"))
    context: dict[str, Any] = {
        "document": document,
        "version": version,
        "published": document.published_version_id == version.pk,
        "page": page,
        "chunks": chunk_views(version, list(page)),
    }
    return render(request, "documents/chunks.html", context)
