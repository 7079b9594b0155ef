"""REST endpoints: thin. They parse input, check the tenant, call a service or a selector."""

# long-module: the REST views of documents, versions, jobs and search; each is a thin parse-then-
# service call, and they share the tenant guard and the error shapes.

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils.translation import gettext_noop
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from documents.api import output as out
from documents.api import serializers as s
from documents.api.errors import ApiError
from documents.api.parsers import BoundedJSONParser
from documents.models import Document, DocumentVersion, Tenant
from documents.principals import Viewer
from documents.retrieval.filters import Filter, parse_filter
from documents.retrieval.neighbours import neighbours_of
from documents.search import SearchHit, SearchUnavailable, search
from documents.selectors import (
    access_document,
    access_version,
    access_version_by_job,
    documents_of,
    hidden_from,
    tenant_for,
    viewer_for,
)
from documents.services.access import AccessInputError, check_principals
from documents.services.attributes import (
    DocumentInputError,
    attributes_from_json,
    check_attributes,
    check_title,
    document_update,
)
from documents.services.collections import collection_of
from documents.services.delete import DeleteRefused, DeleteResult, document_delete, version_delete
from documents.services.process_again import version_process_again
from documents.services.storage import storage_usage
from documents.services.upload import UploadResult, document_upload
from documents.templatetags.search_marks import highlight
from documents.texts import Text
from documents.throttles import SEARCH_THROTTLES, UPLOAD_THROTTLES
from jobs.models import Actor
from jobs.services.lifecycle import job_cancel, job_retry


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=out.ErrorOutEnvelope, description=description)


ERRORS = {
    400: _error("Invalid input"),
    401: _error("Not authenticated"),
    403: _error("The account belongs to no workspace"),
    404: _error("Not found, or another tenant's"),
}
UPLOAD_ERRORS = {
    **ERRORS,
    413: _error("The file is larger than the limit (file_too_large)"),
    415: _error("The file type is not supported (unsupported_type)"),
    429: _error("The workspace's queue is full (quota_exceeded)"),
}
ACTION_ERRORS = {**ERRORS, 409: _error("Not possible in the job's state (with the reason)")}


class HasTenant(permissions.BasePermission):
    """Authenticated and a member of a tenant; the tenant is put on the request."""

    message = "Your account does not belong to a workspace."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        tenant = tenant_for(request.user)
        request.tenant = tenant  # type: ignore[attr-defined]
        return tenant is not None


class TenantView(APIView):
    permission_classes = [HasTenant]

    @property
    def tenant(self) -> Tenant:
        return self.request.tenant  # type: ignore[attr-defined]

    @property
    def viewer(self) -> Viewer:
        """The caller's principals in the tenant, read once per request."""
        found = getattr(self.request, "viewer", None)
        if found is None:
            found = viewer_for(self.request.user, self.tenant)
            self.request.viewer = found  # type: ignore[attr-defined]
        return found

    def document(self, document_id: Any) -> Document:
        document = access_document(self.viewer, document_id)
        if document is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        return document

    def visible_or_404(self, document_id: Any) -> None:
        """A document the caller may not see answers what a missing one does (a delete of a
        deleted document stays idempotent: its service answers for those)."""
        if hidden_from(self.viewer, document_id):
            raise ApiError(404, "not_found", gettext_noop("Not found."))

    def upload(self, request: Request, document: Document | None = None) -> Response:
        """A new document, or with ``document`` its next version, through the upload service."""
        form = s.UploadIn(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        attributes_text = form.validated_data.get("attributes") or ""
        collection = None
        if document is None and form.validated_data.get("collection") is not None:
            collection = collection_of(self.tenant, form.validated_data["collection"])
            if collection is None:
                raise ApiError(
                    404, "collection_not_found", gettext_noop("No such collection in your workspace.")
                )
        access = None
        if "access" in form.validated_data:
            if document is not None:
                raise ApiError(
                    400,
                    "invalid_access",
                    gettext_noop("A new version keeps its document's access; change it with PUT .../access."),
                    {"field": "access"},
                )
            raw = [key.strip() for key in form.validated_data["access"].split(",") if key.strip()]
            try:
                access = check_principals(self.tenant, raw)
            except AccessInputError as exc:
                raise ApiError(400, exc.code, exc.message, {"field": "access"}) from None
        result = document_upload(
            tenant=self.tenant,
            access=access,
            data=upload,
            filename=upload.name or "",
            title=form.validated_data.get("title", ""),
            user=request.user,
            document=document,
            collection=collection,
            attributes=attributes_from_json(attributes_text) if attributes_text.strip() else None,
        )
        return upload_answer(result)

    def version(self, document_id: Any, job_id: Any) -> DocumentVersion:
        version = access_version_by_job(self.viewer, document_id, job_id)
        if version is None or version.job is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        return version


def upload_answer(result: UploadResult) -> Response:
    assert result.job is not None
    return Response(
        out.upload_out(result), status=status.HTTP_200_OK if result.duplicate else status.HTTP_201_CREATED
    )


class Pages(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


class DocumentsView(TenantView):
    throttle_classes = UPLOAD_THROTTLES
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        operation_id="documents_list", parameters=[s.ListIn], responses={200: out.DocumentPageOut, **ERRORS}
    )
    def get(self, request: Request) -> Response:
        query = s.ListIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        collection_ids = list(data.get("collections") or [])
        if data.get("collection") is not None:
            collection_ids.append(data["collection"])
        paginator = Pages()
        documents = documents_of(
            self.viewer,
            state=data.get("state"),
            q=data.get("q", ""),
            ordering=data["ordering"],
            collection_ids=collection_ids or None,
        )
        page = paginator.paginate_queryset(documents, request)
        answer = paginator.get_paginated_response([out.document_out(d) for d in page or []])
        # Where users see their documents, they see their stored bytes against the limit.
        answer.data["storage"] = out.StorageOut(storage_usage(self.tenant)).data
        return answer

    @extend_schema(
        request={"multipart/form-data": s.UploadIn},
        responses={201: out.UploadOut, 200: out.UploadOut, **UPLOAD_ERRORS},
    )
    def post(self, request: Request) -> Response:
        return self.upload(request)


PATCH_FIELDS = ("title", "attributes")


class DocumentView(TenantView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: out.DocumentDetailOut, **ERRORS})
    def get(self, request: Request, document_id: str) -> Response:
        return Response(out.document_detail_out(self.document(document_id)))

    @extend_schema(
        request=s.DocumentPatchIn,
        responses={200: out.DocumentDetailOut, **ERRORS, 415: _error("The body is not JSON")},
    )
    def patch(self, request: Request, document_id: str) -> Response:
        """Change the title and/or replace the attributes; fields left out stay as they are."""
        document = self.document(document_id)
        data = request.data
        if not isinstance(data, dict):
            raise DocumentInputError("body", "invalid_body", gettext_noop("The body must be a JSON object."))
        unknown = sorted(str(name) for name in data if name not in PATCH_FIELDS)
        if unknown:
            raise DocumentInputError(
                unknown[0][:64],
                "unknown_field",
                Text(
                    gettext_noop("Only these fields can be changed: %(fields)s."),
                    fields=", ".join(PATCH_FIELDS),
                ),
            )
        if not data:
            raise DocumentInputError(
                "body", "nothing_to_change", gettext_noop("Send a title, attributes or both.")
            )
        title, attributes = data.get("title"), data.get("attributes")
        # An explicit null is refused like any other bad value, not read as "leave it as is".
        if "title" in data and title is None:
            check_title(None)
        if "attributes" in data and attributes is None:
            check_attributes(None)
        document_update(document=document, title=title, attributes=attributes)
        return Response(out.document_detail_out(self.document(document_id)))

    @extend_schema(request=None, responses={202: out.DeletionOut, 204: None, **ERRORS})
    def delete(self, request: Request, document_id: str) -> Response:
        self.visible_or_404(document_id)
        return deletion_answer(
            document_delete(tenant=self.tenant, document_id=document_id, user=request.user)
        )


class DocumentViewWithoutSlash(DocumentView):
    """The same endpoint without the trailing slash (a redirect would drop a DELETE); listed in
    the schema once, under its slash form."""

    schema = None


def deletion_answer(result: DeleteResult | None) -> Response:
    """202 with the deletion while its cleanup runs, 204 once nothing remains to clean."""
    if result is None:
        raise ApiError(404, "not_found", gettext_noop("Not found."))
    if not result.pending:
        return Response(status=status.HTTP_204_NO_CONTENT)
    body = out.deletion_out(result)
    return Response(body, status=status.HTTP_202_ACCEPTED)


class VersionView(TenantView):
    @extend_schema(request=None, responses={202: out.DeletionOut, 204: None, **ACTION_ERRORS})
    def delete(self, request: Request, document_id: str, number: int) -> Response:
        self.visible_or_404(document_id)
        try:
            result = version_delete(
                tenant=self.tenant, document_id=document_id, number=number, user=request.user
            )
        except DeleteRefused as exc:
            raise ApiError(409, exc.code, exc.message) from None
        return deletion_answer(result)


class VersionsView(TenantView):
    throttle_classes = UPLOAD_THROTTLES
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.UploadIn},
        responses={201: out.UploadOut, 200: out.UploadOut, **UPLOAD_ERRORS},
    )
    def post(self, request: Request, document_id: str) -> Response:
        return self.upload(request, self.document(document_id))


class JobView(TenantView):
    @extend_schema(responses={200: out.JobStatusOut, **ERRORS})
    def get(self, request: Request, document_id: str, job_id: str) -> Response:
        return Response(out.job_status(self.version(document_id, job_id)))


class JobCancelView(TenantView):
    @extend_schema(request=None, responses={202: out.JobStatusOut, **ACTION_ERRORS})
    def post(self, request: Request, document_id: str, job_id: str) -> Response:
        version = self.version(document_id, job_id)
        job = job_cancel(job_id=job_id, actor=Actor.USER, actor_name=request.user.get_username())
        return Response(out.job_status(version, job), status=status.HTTP_202_ACCEPTED)


class JobRetryView(TenantView):
    @extend_schema(request=None, responses={202: out.JobStatusOut, **ACTION_ERRORS})
    def post(self, request: Request, document_id: str, job_id: str) -> Response:
        version = self.version(document_id, job_id)
        job = job_retry(job_id=job_id, actor=Actor.USER, actor_name=request.user.get_username())
        return Response(out.job_status(version, job), status=status.HTTP_202_ACCEPTED)


class VersionProcessAgainView(TenantView):
    """A cancelled or failed version's stored bytes become the next version, with a new job."""

    @extend_schema(
        request=None,
        responses={201: out.JobStatusOut, 429: _error("The workspace's queue is full"), **ACTION_ERRORS},
    )
    def post(self, request: Request, document_id: str, number: str) -> Response:
        version = access_version(self.viewer, document_id, number)
        if version is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        result = version_process_again(version=version, user=request.user)
        assert result.job is not None
        return Response(out.job_status(result.version, result.job), status=status.HTTP_201_CREATED)


class SearchView(TenantView):
    """Hybrid search of the tenant's published documents (GET for a plain query, POST for
    filters and document ids)."""

    throttle_classes = SEARCH_THROTTLES
    parser_classes = [BoundedJSONParser]

    @extend_schema(parameters=[s.SearchIn], responses={200: s.SearchOut, **ERRORS})
    def get(self, request: Request) -> Response:
        query = s.SearchIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        return self.answer(
            data["q"],
            data["k"],
            data["mode"],
            data.get("filters"),
            collection_ids=data.get("collections"),
            neighbours=data["neighbours"],
        )

    @extend_schema(request=s.SearchBodyIn, responses={200: s.SearchOut, **ERRORS})
    def post(self, request: Request) -> Response:
        body = s.SearchBodyIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        raw = data.get("filters")
        filters = parse_filter(raw) if raw is not None else None  # FilterError: a 400 naming the field
        return self.answer(
            data["query"],
            data["k"],
            data["mode"],
            filters,
            data.get("document_ids"),
            data.get("collections"),
            neighbours=data["neighbours"],
        )

    def answer(
        self,
        q: str,
        k: int,
        mode: Any,
        filters: Filter | None = None,
        document_ids: list[Any] | None = None,
        collection_ids: list[Any] | None = None,
        *,
        neighbours: int = 0,
    ) -> Response:
        try:
            # Another tenant's collection ids match nothing: the search is the tenant's first.
            hits = search(
                self.tenant,
                q,
                k,
                mode=mode,
                filters=filters,
                document_ids=document_ids,
                collection_ids=collection_ids,
                viewer=self.viewer,
            )
        except SearchUnavailable:
            raise ApiError(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                "search_unavailable",
                gettext_noop(
                    "Search by meaning is unavailable right now (the embedding service failed). "
                    "Search with mode=lexical or hybrid, or try again later."
                ),
            ) from None
        results = [hit_out(h, q) for h in hits]
        if neighbours:
            for result, around in zip(results, neighbours_of(hits, neighbours), strict=True):
                result["neighbours"] = {
                    "before": [asdict(chunk) for chunk in around.before],
                    "after": [asdict(chunk) for chunk in around.after],
                }
        return Response({"query": q, "mode": mode, "results": results})


def hit_out(hit: SearchHit, query: str) -> dict[str, Any]:
    return {
        "document_id": str(hit.document_id),
        "document_title": hit.document_title,
        "attributes": hit.attributes,
        "version": hit.version,
        "page_start": hit.page_start,
        "page_end": hit.page_end,
        "heading_path": hit.heading_path,
        "snippet": hit.snippet,
        "highlight": str(highlight(hit.snippet, query)),
        "score": hit.score,
        "components": {name: {"rank": rank, "score": hit.scores[name]} for name, rank in hit.ranks.items()},
        "ordinal": hit.ordinal,
    }
