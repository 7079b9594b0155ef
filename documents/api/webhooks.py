"""``/api/webhooks``: a tenant's webhook endpoints. The secret is in the creation answer only.

An endpoint belongs to the member who registers it and is told only about the documents they
may see; so only its owner (or a workspace admin) changes or removes it: anyone else could
point it at a server of their own and be told what only the owner may see."""

from __future__ import annotations

import uuid
from typing import Any

from django.utils.translation import gettext_noop
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.serializers import StrictIn
from documents.api.views import ERRORS, TenantView
from documents.models import WebhookEndpoint
from documents.services.webhooks import (
    EVENTS,
    WebhookInvalid,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_update,
)
from documents.throttles import WRITE_THROTTLES, WebhookUserThrottle


class WebhookIn(StrictIn):
    url = serializers.URLField(max_length=2000, help_text="http(s) URL; private networks are refused.")
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENTS), min_length=1, max_length=10)
    enabled = serializers.BooleanField(required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=200)


class WebhookOut(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    url = serializers.URLField()
    events = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()
    disabled_reason = serializers.CharField(help_text="Why it was disabled, when it was for failing.")


class WebhookCreatedOut(WebhookOut):
    secret = serializers.CharField(help_text="whsec_ + base64: shown here only, keep it.")


def endpoint_out(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": str(endpoint.pk),
        "url": endpoint.url,
        "events": endpoint.events,
        "enabled": endpoint.enabled,
        "description": endpoint.description,
        "created_at": endpoint.created_at.isoformat(),
        "disabled_reason": endpoint.disabled_reason,
    }


def _invalid(exc: WebhookInvalid) -> ApiError:
    return ApiError(400, exc.code, exc.message)


class WebhooksView(TenantView):
    throttle_classes = [WebhookUserThrottle, *WRITE_THROTTLES]

    @extend_schema(operation_id="webhooks_list", responses={200: WebhookOut(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        endpoints = WebhookEndpoint.objects.filter(tenant=self.tenant).order_by("created_at")
        return Response([endpoint_out(e) for e in endpoints])

    @extend_schema(request=WebhookIn, responses={201: WebhookCreatedOut, **ERRORS})
    def post(self, request: Request) -> Response:
        form = WebhookIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            endpoint = webhook_endpoint_create(
                tenant=self.tenant,
                url=data["url"],
                events=data["events"],
                description=data.get("description", ""),
                user=request.user,
            )
        except WebhookInvalid as exc:
            raise _invalid(exc) from None
        if data.get("enabled") is False:
            endpoint = webhook_endpoint_update(endpoint=endpoint, enabled=False)
        return Response({**endpoint_out(endpoint), "secret": endpoint.secret}, status=status.HTTP_201_CREATED)


class WebhookView(TenantView):
    throttle_classes = [WebhookUserThrottle, *WRITE_THROTTLES]

    def endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        try:
            pk = uuid.UUID(endpoint_id)
        except ValueError:  # not an id: the same answer as another tenant's id
            raise ApiError(404, "not_found", "Not found.") from None
        found = WebhookEndpoint.objects.filter(tenant=self.tenant, pk=pk).first()
        if found is None:
            raise ApiError(404, "not_found", "Not found.")
        return found

    def endpoint_to_change(self, endpoint_id: str) -> WebhookEndpoint:
        endpoint = self.endpoint(endpoint_id)
        owner = endpoint.created_by_id is not None and endpoint.created_by_id == self.request.user.pk
        if not (owner or self.viewer.is_admin):
            raise ApiError(
                403,
                "not_allowed",
                gettext_noop("Only the endpoint's owner or a workspace admin changes or removes it."),
            )
        return endpoint

    @extend_schema(responses={200: WebhookOut, **ERRORS})
    def get(self, request: Request, endpoint_id: str) -> Response:
        return Response(endpoint_out(self.endpoint(endpoint_id)))

    @extend_schema(request=WebhookIn(partial=True), responses={200: WebhookOut, **ERRORS})
    def patch(self, request: Request, endpoint_id: str) -> Response:
        endpoint = self.endpoint_to_change(endpoint_id)
        form = WebhookIn(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            endpoint = webhook_endpoint_update(
                endpoint=endpoint,
                url=data.get("url"),
                events=data.get("events"),
                enabled=data.get("enabled"),
                description=data.get("description"),
            )
        except WebhookInvalid as exc:
            raise _invalid(exc) from None
        return Response(endpoint_out(endpoint))

    @extend_schema(request=None, responses={204: None, **ERRORS})
    def delete(self, request: Request, endpoint_id: str) -> Response:
        webhook_endpoint_delete(endpoint=self.endpoint_to_change(endpoint_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
