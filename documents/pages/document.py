"""HTML pages: the documents list, a document's live status, search. Login and a tenant required.

Views parse input and call the same selectors and services as the API (``documents.selectors``,
``document_upload``, ``job_cancel`` / ``job_retry``); they never write a status themselves.
Another tenant's ids answer 404, exactly like ids that do not exist.
"""

# long-module: the documents app's HTML pages; each view is short and they share the tenant guard,
# the throttles and the status JSON the pages' scripts read.

from __future__ import annotations

import mimetypes
import posixpath
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.staticfiles import finders
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from documents.api.output import job_status
from documents.engines.validation import UploadRejected
from documents.models import Document, DocumentVersion, Tenant
from documents.pages.forms import UploadForm, VersionUploadForm, rejection_message
from documents.retrieval.filters import FilterError, parse_filter_json
from documents.retrieval.neighbours import MAX_NEIGHBOURS, neighbours_of
from documents.search import MODES as SEARCH_MODES
from documents.search import SearchUnavailable, search
from documents.selectors import (
    access_document,
    access_version_by_job,
    tenant_for,
    versions_of,
    viewer_for,
)
from documents.services.collections import collection_of, collections_of
from documents.services.upload import UploadResult, document_upload
from documents.templatetags.status_words import js_catalog
from documents.texts import localize
from documents.throttles import SEARCH_THROTTLES, UPLOAD_THROTTLES, page_throttled
from jobs.errors import JobConflict
from jobs.models import FINISHED, Actor, Status
from jobs.services.lifecycle import job_cancel, job_retry

SEARCH_RESULTS = 20
TenantView = Callable[..., HttpResponse]


def tenant_required(view: TenantView) -> Callable[..., HttpResponse]:
    """Log in first; then call ``view(request, tenant, ...)``, or answer 403 without a tenant."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        tenant = tenant_for(request.user)
        if tenant is None:
            return render(request, "documents/no_workspace.html", status=403)
        return view(request, tenant, *args, **kwargs)

    return wrapper


def _see_other(url: str) -> HttpResponseRedirect:
    # 303: after a POST the browser must GET the page, and a reload must not post again.
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


def _status_of(version: DocumentVersion | None) -> dict[str, Any] | None:
    return job_status(version) if version is not None and version.job is not None else None


def is_active(status: dict[str, Any] | None) -> bool:
    """Whether the job may still change by itself (the page refreshes and listens only then)."""
    return status is not None and status["status"] not in FINISHED


# --- uploads -----------------------------------------------------------------------------------


def _upload(
    request: HttpRequest, tenant: Tenant, forms: list[UploadForm], document: Document | None = None
) -> tuple[UploadResult | None, int]:
    """Validate ``forms`` (bound to this request) and upload; a refusal lands on every form.

    Returns the upload's result, or ``None`` and the HTTP status for the re-rendered form.
    """
    if not all(form.is_valid() for form in forms):
        return None, 400
    if page_throttled(request, UPLOAD_THROTTLES):
        for form in forms:
            form.add_error("file", _("Too many uploads in a short time. Wait a minute and try again."))
        return None, 429
    upload = forms[0].cleaned_data["file"]
    collection = None
    if document is None and forms[0].cleaned_data.get("collection"):
        collection = collection_of(tenant, forms[0].cleaned_data["collection"])
        if collection is None:
            for form in forms:
                form.add_error("collection", _("No such collection in your workspace."))
            return None, 404
    try:
        result = document_upload(
            tenant=tenant,
            data=upload,
            filename=upload.name or "",
            title=forms[0].cleaned_data["title"],
            user=request.user,
            document=document,
            collection=collection,
        )
    except UploadRejected as exc:
        for form in forms:
            form.add_error("file", rejection_message(exc, tenant))
        return None, exc.http_status
    return result, 200


def _after_upload(request: HttpRequest, result: UploadResult) -> HttpResponseRedirect:
    if result.duplicate:
        messages.info(request, _("This file is identical to the published version: nothing to process."))
    return _see_other(reverse("document", args=[result.document.pk]))


# --- one document ------------------------------------------------------------------------------


def version_role(version: DocumentVersion, document: Document) -> str:
    """Where a version stands: published, processing, failed, cancelled or superseded."""
    if version.pk == document.published_version_id:
        return "published"
    if version.superseded_at is not None:
        return "superseded"
    job = version.job
    if job is None:
        return "not_published"
    if job.status == Status.FAILED:
        return "failed"
    if job.status == Status.CANCELLED:
        return "cancelled"
    return "not_published" if job.status == Status.READY else "processing"


def _upload_forms(request: HttpRequest | None = None) -> dict[str, UploadForm]:
    """The two places a new version can be uploaded from: the failure box (shown when the cause
    says re-upload) and the page's own section; distinct ids, the same data and errors."""
    data = (request.POST, request.FILES) if request is not None else ()
    return {"reupload": VersionUploadForm(*data, auto_id="reupload_%s"), "version": VersionUploadForm(*data)}


def _render_document(
    request: HttpRequest, document: Document, forms: dict[str, UploadForm], http_status: int = 200
) -> HttpResponse:
    status = _status_of(document.latest_version)
    versions = [{"version": v, "role": version_role(v, document)} for v in versions_of(document)]
    error = (status or {}).get("error") or {}
    context = {
        "document": document,
        "status": status,
        "active": is_active(status),
        "reupload": error.get("action") == "reupload",
        "versions": versions,
        "forms": forms,
        "catalog": js_catalog(),
    }
    return render(request, "documents/detail.html", context, status=http_status)


@require_GET
@tenant_required
def document_detail(request: HttpRequest, tenant: Tenant, document_id: str) -> HttpResponse:
    """A document's processing status (live), its failure and what to do, and its versions."""
    document = access_document(viewer_for(request.user, tenant), document_id)
    if document is None:
        raise Http404
    return _render_document(request, document, _upload_forms())


@require_http_methods(["GET", "POST"])
@tenant_required
def version_upload(request: HttpRequest, tenant: Tenant, document_id: str) -> HttpResponse:
    """Upload a new version of a document (also the re-upload after a failure)."""
    document = access_document(viewer_for(request.user, tenant), document_id)
    if document is None:
        raise Http404
    if request.method == "GET":
        # A refused upload re-renders the page at this address; going "back" to it (the
        # language switch does) lands on the document.
        return HttpResponseRedirect(reverse("document", args=[document.pk]))
    forms = _upload_forms(request)
    result, http_status = _upload(request, tenant, list(forms.values()), document)
    if result is not None:
        return _after_upload(request, result)
    return _render_document(request, document, forms, http_status)


@require_POST
@tenant_required
def job_cancel_view(request: HttpRequest, tenant: Tenant, document_id: str, job_id: str) -> HttpResponse:
    """Cancel the job (without JavaScript; the page's script posts to the API instead). The
    first post, without ``confirm=yes``, answers with a confirmation page."""
    if request.POST.get("confirm") != "yes":
        version = access_version_by_job(viewer_for(request.user, tenant), document_id, job_id)
        if version is None:
            raise Http404
        context = {"document": version.document, "version": version, "job_id": job_id}
        return render(request, "documents/cancel_confirm.html", context)
    return _job_action(
        request,
        tenant,
        document_id,
        job_id,
        job_cancel,
        refused=_("This job can no longer be cancelled. The page shows its current state."),
        done=_("Cancellation requested: processing stops at the next safe point."),
    )


@require_POST
@tenant_required
def job_retry_view(request: HttpRequest, tenant: Tenant, document_id: str, job_id: str) -> HttpResponse:
    """Retry a failed job where its cause allows it."""
    return _job_action(
        request,
        tenant,
        document_id,
        job_id,
        job_retry,
        refused=_("This job cannot be retried now. The page shows its current state."),
        done=_("Processing was queued again."),
    )


def _job_action(
    request: HttpRequest,
    tenant: Tenant,
    document_id: str,
    job_id: str,
    service: Callable[..., Any],
    *,
    refused: str,
    done: str,
) -> HttpResponse:
    """Run the user's ``service`` on the tenant's job and go back to the document page with
    ``done``, or ``refused`` when the job's state no longer allows it."""
    version = access_version_by_job(viewer_for(request.user, tenant), document_id, job_id)
    if version is None:
        raise Http404
    try:
        service(job_id=version.job_id, actor=Actor.USER, actor_name=request.user.get_username())
    except JobConflict:
        messages.error(request, refused)
    else:
        messages.success(request, done)
    return _see_other(reverse("document", args=[version.document_id]))


# --- search ------------------------------------------------------------------------------------


@require_GET
@tenant_required
def search_page(request: HttpRequest, tenant: Tenant) -> HttpResponse:
    """Search the tenant's published versions in a mode, optionally with an attribute filter
    (JSON, as the API takes it); snippets show the query's terms marked, hits their scores."""
    query = request.GET.get("q", "").strip()[:500]
    mode = request.GET.get("mode", "hybrid")
    mode = mode if mode in SEARCH_MODES else "hybrid"
    filter_text = request.GET.get("filters", "").strip()[:4000]
    # The chunks shown around each hit: 0-5; anything else shows none, quietly (a plain GET form).
    raw = request.GET.get("neighbours", "0")
    neighbours = int(raw) if raw.isdigit() and int(raw) <= MAX_NEIGHBOURS else 0
    filter_error = ""
    filters = None
    if filter_text:
        try:
            filters = parse_filter_json(filter_text)
        except FilterError as exc:
            filter_error = localize(exc.message)
    # A collection of another workspace (or none such) scopes to nothing: the search is the tenant's.
    chosen = collection_of(tenant, request.GET["collection"]) if request.GET.get("collection") else None
    collection_ids = [chosen.pk] if chosen else ([] if request.GET.get("collection") else None)
    context: dict[str, Any] = {
        "collections": list(collections_of(tenant)),
        "chosen": chosen,
        "query": query,
        "hits": [],
        "mode": mode,
        "modes": SEARCH_MODES,
        "filter_text": filter_text,
        "filter_error": filter_error,
        "neighbours": neighbours,
        "neighbour_choices": range(MAX_NEIGHBOURS + 1),
        "results": [],
    }
    if query and page_throttled(request, SEARCH_THROTTLES):
        messages.error(request, _("Too many searches in a short time. Wait a minute and try again."))
        return render(request, "documents/search.html", context, status=429)
    context["hits"] = []
    if query and not filter_error:
        try:
            context["hits"] = search(
                tenant,
                query,
                SEARCH_RESULTS,
                mode=mode,
                filters=filters,
                collection_ids=collection_ids,
                viewer=viewer_for(request.user, tenant),
            )
            around = neighbours_of(context["hits"], neighbours)
            context["results"] = list(zip(context["hits"], around, strict=True))
        except SearchUnavailable:
            messages.error(
                request, _("Search by meaning is unavailable right now. Try the other modes, or again later.")
            )
    return render(request, "documents/search.html", context)


# --- static files ------------------------------------------------------------------------------


@require_GET
def static_file(request: HttpRequest, path: str) -> HttpResponse:
    """Serve the pages' CSS and JavaScript (and the admin's) from the apps' static folders.

    The single-machine platform runs its web server with no reverse proxy in front, so nothing else
    serves ``STATIC_URL``; behind a proxy that serves ``collectstatic``'s output these requests
    never reach Django. The files are small, so they are read whole: a streamed file response
    would make the ASGI handler warn on every request.
    """
    normalized = posixpath.normpath(path).lstrip("/")
    found = None if normalized.startswith("..") else finders.find(normalized)
    if not isinstance(found, str) or not Path(found).is_file():
        raise Http404
    content_type, _encoding = mimetypes.guess_type(found)
    response = HttpResponse(Path(found).read_bytes(), content_type=content_type or "application/octet-stream")
    response["Cache-Control"] = "public, max-age=300"
    return response
