"""The base view of /v1: Bearer (or session) authentication, a tenant, OpenAI-shaped errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from documents.api.views import HasTenant, TenantView
from documents.api_v1.auth import BearerTokenAuthentication
from documents.api_v1.errors import handle_v1_exception


class V1ErrorInner(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField()
    param = serializers.CharField(allow_null=True)
    code = serializers.CharField(allow_null=True)


class V1ErrorOut(serializers.Serializer):
    error = V1ErrorInner()


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=V1ErrorOut, description=description)


V1_ERRORS = {
    400: _error("Invalid request (invalid_request_error)"),
    401: _error("No or a wrong API key (authentication_error)"),
    403: _error("The account belongs to no workspace"),
    404: _error("Not found, or another tenant's"),
}


class JsonAnyway(BaseContentNegotiation):
    """Answer JSON whatever ``Accept`` says: the SDK asks for ``application/binary`` when it
    downloads content, and its errors must still arrive as JSON (a 406 would hide them)."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        content_type = request.content_type.partition(";")[0].strip()
        return next((p for p in parsers if p.media_type == content_type), None)

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


class V1View(TenantView):
    content_negotiation_class = JsonAnyway
    authentication_classes = [BearerTokenAuthentication, SessionAuthentication]
    permission_classes = [HasTenant]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return handle_v1_exception
