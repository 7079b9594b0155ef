"""The documents list page: the tenant's documents with their live state, filtered by state,
searched by title, sorted and paged (a plain GET form, no JavaScript needed); POST uploads."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from documents.models import Tenant
from documents.pages.document import _after_upload, _status_of, _upload, tenant_required
from documents.pages.forms import UploadForm
from documents.selectors import DEFAULT_ORDERING, ORDERINGS, STATE_WORDS, documents_of, viewer_for
from documents.services.collections import collection_of, collections_of
from documents.services.storage import storage_usage

DOCUMENTS_PER_PAGE = 50

ORDERING_LABELS = {
    "-last_activity": gettext_lazy("Latest activity first"),
    "title": gettext_lazy("Title, A to Z"),
    "-title": gettext_lazy("Title, Z to A"),
    "-created": gettext_lazy("Newest first"),
    "created": gettext_lazy("Oldest first"),
}


@require_http_methods(["GET", "POST"])
@tenant_required
def document_list(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Every document of the tenant with its current state; POST uploads a new document."""
    form, http_status = UploadForm(), 200
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        result, http_status = _upload(request, tenant, [form])
        if result is not None:
            return _after_upload(request, result)
    # Filters, sort and title search from the query string; unknown values fall back quietly.
    state = request.GET.get("state", "")
    state = state if state in STATE_WORDS else ""
    ordering = request.GET.get("ordering", DEFAULT_ORDERING)
    ordering = ordering if ordering in ORDERINGS else DEFAULT_ORDERING
    q = request.GET.get("q", "")[:200]
    collections = list(collections_of(tenant))
    wanted = request.GET.get("collection", "")
    chosen = collection_of(tenant, wanted) if wanted else None
    if wanted and chosen is None:
        raise Http404  # another workspace's collection, or none such: as an unknown id
    documents = documents_of(
        viewer_for(request.user, tenant),
        state=state or None,
        q=q,
        ordering=ordering,
        collection_ids=[chosen.pk] if chosen else None,
    )
    page = Paginator(documents, DOCUMENTS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [{"document": d, "status": _status_of(d.latest_version)} for d in page]
    context = {
        "page": page,
        "rows": rows,
        "form": form,
        "filters": {"state": state, "ordering": ordering, "q": q},
        "states": STATE_WORDS,
        "orderings": ORDERING_LABELS,
        "filtered": bool(state or q.strip()),
        "collections": collections,
        "chosen": chosen,
        "storage": storage_usage(tenant),
    }
    return render(request, "documents/list.html", context, status=http_status)
