"""``/api/reindex``: start a re-index of the caller's workspace, follow it, cancel or retry it.

The status JSON (``ReindexOut`` in ``documents/api/output.py``) has the fields of an ingestion
job's status that a workspace-wide job has, plus the embedders and the versions and chunks done
of the published total.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.output import ReindexOut, reindex_status
from documents.api.parsers import BoundedJSONParser
from documents.api.serializers import StrictIn
from documents.api.views import ACTION_ERRORS, ERRORS, TenantView, _error
from documents.services.reindex import ReindexRefused, reindex_job, reindex_start
from jobs.models import Actor, Job
from jobs.quotas import QueueFull
from jobs.services.lifecycle import job_cancel, job_retry


class ReindexIn(StrictIn):
    embedder = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="An embedder name (e.g. hashing-v1-512), a backend (local, hashing, http) or "
        "hashing:<dimension>; default: the configured embedder.",
    )
    query_set = serializers.UUIDField(
        required=False,
        help_text="Gate the switch on this labelled query set (docs/evaluation.md): switch only if "
        "semantic MRR@10 with the new vectors is not lower than with the old by more than margin.",
    )
    margin = serializers.FloatField(required=False, default=0.0, min_value=0.0, max_value=1.0)


class ReindexView(TenantView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        request=ReindexIn,
        responses={
            202: ReindexOut,
            **ACTION_ERRORS,
            409: _error("A re-index is running (reindex_running) or the embedder is the active one"),
            429: _error("The workspace's queue is full (quota_exceeded)"),
        },
    )
    def post(self, request: Request) -> Response:
        """Re-embed every published version with another embedder; search keeps working and
        switches to it in one commit when every version has its new vectors."""
        form = ReindexIn(data=request.data if isinstance(request.data, dict) else {})
        form.is_valid(raise_exception=True)
        try:
            job = reindex_start(
                tenant=self.tenant,
                embedder=form.validated_data.get("embedder", ""),
                actor=Actor.USER,
                actor_name=request.user.get_username(),
                query_set=form.validated_data.get("query_set"),
                margin=form.validated_data["margin"],
            )
        except ReindexRefused as refused:
            raise ApiError(refused.http_status, refused.code, refused.message) from None
        except QueueFull:
            raise ApiError(
                429, "quota_exceeded", gettext_noop("The workspace's queue is full. Try again later.")
            ) from None
        return Response(reindex_status(job), status=status.HTTP_202_ACCEPTED)


class ReindexOfTenant(TenantView):
    def job(self, job_id: str) -> Job:
        try:
            found = reindex_job(self.tenant, job_id)
        except Exception:  # not a job id at all (a malformed UUID)
            found = None
        if found is None:
            raise ApiError(404, "not_found", gettext_noop("Not found."))
        return found


class ReindexJobView(ReindexOfTenant):
    @extend_schema(responses={200: ReindexOut, **ERRORS})
    def get(self, request: Request, job_id: str) -> Response:
        return Response(reindex_status(self.job(job_id)))


class ReindexCancelView(ReindexOfTenant):
    @extend_schema(request=None, responses={202: ReindexOut, **ACTION_ERRORS})
    def post(self, request: Request, job_id: str) -> Response:
        job = job_cancel(job_id=self.job(job_id).pk, actor=Actor.USER, actor_name=request.user.get_username())
        return Response(reindex_status(job), status=status.HTTP_202_ACCEPTED)


class ReindexRetryView(ReindexOfTenant):
    @extend_schema(request=None, responses={202: ReindexOut, **ACTION_ERRORS})
    def post(self, request: Request, job_id: str) -> Response:
        job = job_retry(job_id=self.job(job_id).pk, actor=Actor.USER, actor_name=request.user.get_username())
        return Response(reindex_status(job), status=status.HTTP_202_ACCEPTED)
