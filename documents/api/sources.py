"""``/api/sources``: a workspace's sources (docs/sources.md), where each stands, and "sync now".

Every member reads them; creating, changing, removing and syncing a source is for workspace
admins (a folder source reads the server's disk, within the roots the operator allows). Another
workspace's source is a 404. Refusals name no server path but the one the caller gave.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_noop
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.parsers import BoundedJSONParser
from documents.api.serializers import StrictIn
from documents.api.views import ERRORS, TenantView, _error
from documents.services.collections import collection_of
from documents.sources.models import Source
from documents.sources.selectors import source_of, source_out, sources_of, sync_out
from documents.sources.services import SourceRefused, source_create, source_delete, source_update, sync_start
from jobs.models import Actor

ADMIN_ERRORS = {**ERRORS, 403: _error("Only a workspace admin manages sources")}


CONFIG_HELP = (
    'The kind\'s settings, checked by the kind (docs/sources.md): folder: {"path": an absolute folder '
    'path under a root the operator allows}; s3: {"endpoint", "region", "bucket", "prefix"}; web: '
    '{"start_urls": [URLs of one site]} or {"sitemap": a URL}, with "max_depth", "page_limit" and '
    '"include_prefix" (a path starting with /).'
)
CREDENTIALS_HELP = (
    "The kind's secrets (write-only: stored encrypted, never returned); s3: access_key_id and "
    "secret_access_key; web: bearer_token, or "
    "header_name with header_value. On a change, a secret left out keeps its stored value."
)


def _config_field(**kwargs: Any) -> serializers.DictField:
    return serializers.DictField(help_text=CONFIG_HELP, **kwargs)


def _credentials_field() -> serializers.DictField:
    return serializers.DictField(
        child=serializers.CharField(max_length=4096, allow_blank=True),
        required=False,
        write_only=True,
        help_text=CREDENTIALS_HELP,
    )


class SourceIn(StrictIn):
    name = serializers.CharField(max_length=200)
    collection = serializers.UUIDField(help_text="The collection its documents go into.")
    kind = serializers.ChoiceField(choices=Source.Kind.values, default=Source.Kind.FOLDER)
    config = _config_field()
    credentials = _credentials_field()
    on_removal = serializers.ChoiceField(
        choices=Source.OnRemoval.values,
        default=Source.OnRemoval.DELETE,
        help_text="What a file removed from the source does to its document: delete it or keep it.",
    )
    schedule_minutes = serializers.IntegerField(
        required=False, allow_null=True, help_text="Sync every N minutes (1-44640); empty: only when asked."
    )
    schedule_cron = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=200,
        help_text="Sync at the times of a 5-field cron expression (server time zone), instead of "
        "schedule_minutes; empty: none.",
    )


class SourcePatchIn(StrictIn):
    name = serializers.CharField(max_length=200, required=False)
    config = _config_field(required=False)
    credentials = _credentials_field()
    on_removal = serializers.ChoiceField(choices=Source.OnRemoval.values, required=False)
    schedule_minutes = serializers.IntegerField(required=False, allow_null=True)
    schedule_cron = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=200)


class SyncCountsOut(serializers.Serializer[Any]):
    found = serializers.IntegerField()
    new = serializers.IntegerField()
    changed = serializers.IntegerField()
    removed = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    failed = serializers.IntegerField()


class SyncFailureOut(serializers.Serializer[Any]):
    key = serializers.CharField(help_text="The item's path inside the source.")
    code = serializers.CharField()
    message = serializers.CharField()


class SyncOut(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    job_id = serializers.UUIDField()
    status = serializers.CharField()
    stage = serializers.CharField()
    state = serializers.CharField(help_text="list, compare, apply while running; ready, *_failed, ...")
    state_label = serializers.CharField()
    progress = serializers.FloatField()
    processed = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    counts = SyncCountsOut()
    failures = SyncFailureOut(many=True)
    error = serializers.DictField(allow_null=True)
    batch_id = serializers.UUIDField(allow_null=True)


class SourceOut(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    collection = serializers.UUIDField()
    config = serializers.DictField()
    has_credentials = serializers.BooleanField(help_text="Whether secrets are stored (never shown).")
    on_removal = serializers.CharField()
    schedule_minutes = serializers.IntegerField(allow_null=True)
    schedule_cron = serializers.CharField(allow_null=True)
    next_sync_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    last_sync = SyncOut(allow_null=True)


def _refused(refused: SourceRefused) -> ApiError:
    detail = {"field": refused.field} if refused.field else None
    return ApiError(refused.http_status, refused.code, refused.message, detail)


class SourceViewBase(TenantView):
    parser_classes = [BoundedJSONParser]

    def admin_only(self) -> None:
        if not self.viewer.is_admin:
            raise ApiError(
                403, "permission_denied", gettext_noop("Only a workspace admin may manage sources.")
            )

    def source(self, source_id: str) -> Source:
        found = source_of(self.tenant, source_id)
        if found is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        return found


class SourcesView(SourceViewBase):
    @extend_schema(operation_id="sources_list", responses={200: SourceOut(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        return Response([source_out(s) for s in sources_of(self.tenant)])

    @extend_schema(request=SourceIn, responses={201: SourceOut, **ADMIN_ERRORS})
    def post(self, request: Request) -> Response:
        """Add a source to a collection; nothing is synced until asked or scheduled."""
        self.admin_only()
        form = SourceIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        collection = collection_of(self.tenant, data["collection"])
        if collection is None:
            raise ApiError(404, "collection_not_found", gettext_noop("No such collection in your workspace."))
        try:
            source = source_create(
                tenant=self.tenant,
                collection=collection,
                name=data["name"],
                kind=data["kind"],
                config=dict(data["config"]),
                credentials=dict(data.get("credentials") or {}),
                on_removal=data["on_removal"],
                schedule_minutes=data.get("schedule_minutes"),
                schedule_cron=data.get("schedule_cron"),
                user=request.user,
            )
        except SourceRefused as refused:
            raise _refused(refused) from None
        return Response(source_out(source), status=status.HTTP_201_CREATED)


class SourceView(SourceViewBase):
    @extend_schema(responses={200: SourceOut, **ERRORS})
    def get(self, request: Request, source_id: str) -> Response:
        return Response(source_out(self.source(source_id)))

    @extend_schema(request=SourcePatchIn, responses={200: SourceOut, **ADMIN_ERRORS})
    def patch(self, request: Request, source_id: str) -> Response:
        source = self.source(source_id)
        self.admin_only()
        form = SourcePatchIn(data=request.data, partial=True)
        form.is_valid(raise_exception=True)
        changes = dict(form.validated_data)
        for field in ("config", "credentials"):
            if field in changes:
                changes[field] = dict(changes[field])
        try:
            source = source_update(source=source, **changes)
        except SourceRefused as refused:
            raise _refused(refused) from None
        return Response(source_out(source))

    @extend_schema(responses={204: None, **ADMIN_ERRORS})
    def delete(self, request: Request, source_id: str) -> Response:
        """Remove the source (a running sync is cancelled); its documents stay."""
        source = self.source(source_id)
        self.admin_only()
        source_delete(source=source, actor_name=request.user.get_username())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SourceSyncView(SourceViewBase):
    @extend_schema(
        request=None,
        responses={
            202: SyncOut,
            200: SyncOut,
            **ADMIN_ERRORS,
            429: _error("The workspace's queue is full (quota_exceeded)"),
        },
    )
    def post(self, request: Request, source_id: str) -> Response:
        """Sync now: 202 with the new sync, or 200 with the one still running."""
        source = self.source(source_id)
        self.admin_only()
        try:
            started = sync_start(source=source, actor=Actor.USER, actor_name=request.user.get_username())
        except SourceRefused as refused:
            raise _refused(refused) from None
        return Response(
            sync_out(started.sync), status=status.HTTP_202_ACCEPTED if started.created else status.HTTP_200_OK
        )
