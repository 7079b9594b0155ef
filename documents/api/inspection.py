"""Inspection: a version's chunks (paginated) and the published version's extracted text."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.views import ERRORS, Pages, TenantView
from documents.inspection import (
    NotPublished,
    chunk_views,
    chunks_of,
    download_name,
    published_text,
    version_of,
)
from documents.models import Document, DocumentVersion


class ChunkOut(serializers.Serializer[Any]):
    ordinal = serializers.IntegerField()
    text = serializers.CharField()
    page_start = serializers.IntegerField()
    page_end = serializers.IntegerField()
    heading_path = serializers.ListField(child=serializers.CharField())
    ocr_engine = serializers.CharField(allow_null=True, help_text="The OCR engine, when OCR made the text.")


class ChunkPageOut(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    version = serializers.IntegerField()
    published = serializers.BooleanField()
    results = ChunkOut(many=True)


class VersionInspection(TenantView):
    def numbered(self, document_id: str, number: Any) -> tuple[Document, DocumentVersion]:
        document = self.document(document_id)
        version = version_of(document, number)
        if version is None:
            raise ApiError(404, "not_found", "Not found.")
        return document, version


class ChunksView(VersionInspection):
    @extend_schema(responses={200: ChunkPageOut, **ERRORS})
    def get(self, request: Request, document_id: str, number: int) -> Response:
        document, version = self.numbered(document_id, number)
        paginator = Pages()
        page = list(paginator.paginate_queryset(chunks_of(version), request) or [])
        response = paginator.get_paginated_response([v.__dict__ for v in chunk_views(version, page)])
        assert isinstance(response.data, dict)
        response.data["version"] = version.number
        response.data["published"] = document.published_version_id == version.pk
        return response


class TextView(VersionInspection):
    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR, description="UTF-8, pages split by form feeds."
            ),
            **ERRORS,
            409: OpenApiResponse(description="The version is not the published one (code says why)."),
        }
    )
    def get(self, request: Request, document_id: str, number: int) -> HttpResponse:
        document, version = self.numbered(document_id, number)
        try:
            text = published_text(document, version)
        except NotPublished as exc:
            raise ApiError(409, exc.code, exc.message) from None
        response = HttpResponse(text.encode("utf-8"), content_type="text/plain; charset=utf-8")
        # Django quotes and RFC 5987-encodes the name (an upload's name may hold quotes or CJK).
        response["Content-Disposition"] = content_disposition_header(True, download_name(version))
        return response
