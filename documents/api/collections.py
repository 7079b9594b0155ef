"""``/api/collections``: a tenant's collections (knowledge bases) with their counts.

Another tenant's collection is a 404, like any id the tenant does not own.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.parsers import BoundedJSONParser
from documents.api.serializers import StrictIn
from documents.api.views import ERRORS, TenantView
from documents.models import Collection
from documents.principals import Viewer
from documents.selectors import hides_documents, visible_documents
from documents.services.collections import (
    CollectionCounts,
    CollectionInputError,
    collection_counts,
    collection_create,
    collection_delete,
    collection_of,
    collection_update,
    collections_of,
)
from documents.texts import gettext_noop


class CollectionIn(StrictIn):
    name = serializers.CharField(max_length=256, help_text="Need not be unique; the id is the handle.")
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    metadata = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=512),
        required=False,
        help_text="Up to 16 text key/value pairs, kept as given.",
    )
    text_weight = serializers.FloatField(
        required=False, help_text="How much full-text matches count in hybrid search (0-1, default 1)."
    )
    embedding_weight = serializers.FloatField(
        required=False,
        help_text="How much matches by meaning count in hybrid search (0-1, default 1; not both 0).",
    )


class CollectionPatchIn(CollectionIn):
    name = serializers.CharField(max_length=256, required=False)


class DocumentCountsOut(serializers.Serializer[Any]):
    queued = serializers.IntegerField()
    in_progress = serializers.IntegerField()
    ready = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    total = serializers.IntegerField()


class CollectionOut(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    metadata = serializers.DictField(child=serializers.CharField())
    is_default = serializers.BooleanField(help_text="Where uploads that name no collection go.")
    text_weight = serializers.FloatField(help_text="Hybrid search's weight of full-text matches.")
    embedding_weight = serializers.FloatField(help_text="Hybrid search's weight of matches by meaning.")
    created_at = serializers.DateTimeField()
    document_counts = DocumentCountsOut(help_text="Documents by their latest version's state.")
    chunk_count = serializers.IntegerField(help_text="Chunks of the published versions (what search reads).")


def collection_out(collection: Collection, counts: CollectionCounts) -> dict[str, Any]:
    return {
        "id": str(collection.pk),
        "name": collection.name,
        "description": collection.description,
        "metadata": collection.metadata,
        "is_default": collection.is_default,
        "text_weight": collection.text_weight,
        "embedding_weight": collection.embedding_weight,
        "created_at": collection.created_at.isoformat(),
        "document_counts": counts.documents,
        "chunk_count": counts.chunks,
    }


def _one_out(collection: Collection, viewer: Viewer) -> dict[str, Any]:
    counts = collection_counts([collection], visible_documents(viewer))
    return collection_out(collection, counts[collection.pk])


def _invalid(exc: CollectionInputError) -> ApiError:
    return ApiError(400, exc.code, exc.message, {"field": exc.field})


class CollectionsView(TenantView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(operation_id="collections_list", responses={200: CollectionOut(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        collections = list(collections_of(self.tenant))
        counts = collection_counts(collections, visible_documents(self.viewer))
        return Response([collection_out(c, counts[c.pk]) for c in collections])

    @extend_schema(request=CollectionIn, responses={201: CollectionOut, **ERRORS})
    def post(self, request: Request) -> Response:
        form = CollectionIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            collection = collection_create(
                tenant=self.tenant,
                name=data["name"],
                description=data.get("description", ""),
                metadata=data.get("metadata"),
                text_weight=data.get("text_weight", 1.0),
                embedding_weight=data.get("embedding_weight", 1.0),
            )
        except CollectionInputError as exc:
            raise _invalid(exc) from None
        return Response(_one_out(collection, self.viewer), status=status.HTTP_201_CREATED)


class CollectionView(TenantView):
    parser_classes = [BoundedJSONParser]

    def collection(self, collection_id: str) -> Collection:
        found = collection_of(self.tenant, collection_id)
        if found is None:
            raise ApiError(404, "not_found", "Not found.")
        return found

    @extend_schema(responses={200: CollectionOut, **ERRORS})
    def get(self, request: Request, collection_id: str) -> Response:
        return Response(_one_out(self.collection(collection_id), self.viewer))

    @extend_schema(request=CollectionPatchIn, responses={200: CollectionOut, **ERRORS})
    def patch(self, request: Request, collection_id: str) -> Response:
        collection = self.collection(collection_id)
        form = CollectionPatchIn(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        try:
            collection_update(collection=collection, **form.validated_data)
        except CollectionInputError as exc:
            raise _invalid(exc) from None
        return Response(_one_out(collection, self.viewer))

    @extend_schema(responses={204: None, **ERRORS})
    def delete(self, request: Request, collection_id: str) -> Response:
        collection = self.collection(collection_id)
        if hides_documents(self.viewer, collection.pk):
            raise ApiError(
                403,
                "not_allowed",
                gettext_noop(
                    "Only a workspace admin deletes a collection that holds documents you cannot see."
                ),
            )
        collection_delete(collection=collection, user=request.user, via="api")
        return Response(status=status.HTTP_204_NO_CONTENT)
