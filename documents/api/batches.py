"""``/api/batches``: many files in one request, one document each; counts, states and cancel."""

from __future__ import annotations

import uuid
from typing import Any

from django.utils.translation import gettext_noop
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.serializers import FORM_TOKENS, reject_unknown
from documents.api.views import ACTION_ERRORS, ERRORS, TenantView
from documents.models import Batch
from documents.principals import Viewer
from documents.services.access import AccessInputError, check_principals
from documents.services.batches import Upload, batch_cancel, batch_create, batch_items, file_counts
from documents.services.collections import collection_of
from documents.texts import Text
from documents.throttles import UPLOAD_THROTTLES, most_at_once, throttle_charge

MAX_FILES = 100


class BatchIn(serializers.Serializer[Any]):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True), help_text="The field repeated once per file."
    )
    collection = serializers.UUIDField(
        required=False, help_text="The documents' collection (default: the default one)."
    )
    access = serializers.CharField(
        required=False,
        help_text="Each document's own access list: principal keys, comma-separated (default: inherit).",
    )


class BatchOut(serializers.Serializer[Any]):
    batch_id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    cancel_requested_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    file_counts = serializers.DictField(child=serializers.IntegerField())
    documents = serializers.ListField(child=serializers.DictField())


def batch_out(batch: Batch, viewer: Viewer) -> dict[str, Any]:
    """The batch as ``viewer`` may know it: counts and files of the documents they may see."""
    return {
        "batch_id": str(batch.pk),
        "created_at": batch.created_at.isoformat(),
        "cancel_requested_at": batch.cancel_requested_at.isoformat() if batch.cancel_requested_at else None,
        "completed_at": batch.completed_at.isoformat() if batch.completed_at else None,
        "file_counts": file_counts(batch, viewer),
        "documents": batch_items(batch, viewer),
    }


class BatchesView(TenantView):
    parser_classes = [MultiPartParser]
    throttle_classes = UPLOAD_THROTTLES  # a batch is uploads: it counts in their rate, file by file

    @extend_schema(request={"multipart/form-data": BatchIn}, responses={201: BatchOut, **ERRORS})
    def post(self, request: Request) -> Response:
        reject_unknown(request.data, BatchIn().fields, also=FORM_TOKENS)
        uploads = request.FILES.getlist("files")
        if not uploads:
            raise ApiError(
                400, "no_files", gettext_noop("Send one or more files, each in a field named 'files'.")
            )
        # A batch costs one upload per file: one larger than the upload rate would never fit.
        most = min(MAX_FILES, most_at_once(UPLOAD_THROTTLES) or MAX_FILES)
        if len(uploads) > most:
            message = Text(gettext_noop("Send at most %(count)s files per batch."), count=most)
            raise ApiError(400, "too_many_files", message)
        # the request counted once already; each further file is one more upload
        throttle_charge(request, self, UPLOAD_THROTTLES, len(uploads) - 1)
        collection = None
        if request.POST.get("collection"):
            collection = collection_of(self.tenant, request.POST["collection"])
            if collection is None:  # unknown, malformed or another tenant's
                raise ApiError(
                    404, "collection_not_found", gettext_noop("No such collection in your workspace.")
                )
        access = None
        if "access" in request.POST:
            raw = [key.strip() for key in request.POST["access"].split(",") if key.strip()]
            try:
                access = check_principals(self.tenant, raw)
            except AccessInputError as exc:
                raise ApiError(400, exc.code, exc.message, {"field": "access"}) from None
        batch = batch_create(
            tenant=self.tenant,
            access=access,
            files=[Upload(u.name or "", u) for u in uploads],
            user=request.user,
            collection=collection,
        )
        return Response(batch_out(batch, self.viewer), status=status.HTTP_201_CREATED)


class BatchOfTenant(TenantView):
    def batch(self, batch_id: str) -> Batch:
        try:
            pk = uuid.UUID(batch_id)
        except ValueError:
            raise ApiError(404, "not_found", gettext_noop("Not found.")) from None
        found = Batch.objects.filter(tenant=self.tenant, pk=pk).first()
        if found is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        return found


class BatchView(BatchOfTenant):
    @extend_schema(responses={200: BatchOut, **ERRORS})
    def get(self, request: Request, batch_id: str) -> Response:
        return Response(batch_out(self.batch(batch_id), self.viewer))


class BatchCancelView(BatchOfTenant):
    @extend_schema(request=None, responses={202: BatchOut, **ACTION_ERRORS})
    def post(self, request: Request, batch_id: str) -> Response:
        # A batch whose files have all finished: TransitionRefused, answered 409 with the reason.
        batch = batch_cancel(batch=self.batch(batch_id), user=request.user, viewer=self.viewer)
        return Response(batch_out(batch, self.viewer), status=status.HTTP_202_ACCEPTED)
