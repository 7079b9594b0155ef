"""``/api``: retrieval evaluation (docs/evaluation.md). Labelled query sets of a collection,
their JSON Lines import, evaluation runs (a job kind: started here, followed by their status)
and the comparison of two runs. Another workspace's ids are a 404, like any unknown id.

Per-query rows name the documents their labels point at (a query is often a document's title):
a caller gets only the rows whose labelled documents they may see, and labels only documents
they may see (``documents.selectors.queries_in_sight``). A run's summary figures are the whole
set's: they name no document."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.utils.translation import gettext_noop
from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.output import EvaluationRunOut, evaluation_run_status
from documents.api.serializers import StrictIn
from documents.api.views import ACTION_ERRORS, ERRORS, TenantView
from documents.evaluation.labels import LabelsInvalid
from documents.evaluation.models import EvaluationRun, LabelledQuerySet
from documents.search import MODES
from documents.selectors import queries_in_sight, visible_documents
from documents.services.collections import collection_of
from documents.services.evaluation import (
    EvaluationRefused,
    candidate_record,
    evaluation_start,
    query_set_create,
    query_set_import,
    runs_compare,
)
from jobs.models import Actor
from jobs.quotas import QueueFull

MAX_IMPORT_BYTES = 5 * 1024 * 1024


class JsonLinesParser(BaseParser):
    """A JSON Lines body, handed over as bytes (the import reads and checks it line by line)."""

    media_type = "application/x-ndjson"

    def parse(  # type: ignore[override]  # the body as bytes, not a mapping
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> bytes:
        return stream.read(MAX_IMPORT_BYTES + 1) if stream is not None else b""


class JsonlAlias(JsonLinesParser):
    media_type = "application/jsonl"


class QuerySetIn(StrictIn):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class QuerySetOut(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    collection_id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    queries = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class RunIn(StrictIn):
    embedder = serializers.CharField(required=False, allow_blank=True, max_length=100)
    modes = serializers.ListField(
        child=serializers.ChoiceField(choices=MODES), required=False, allow_empty=False
    )


class CandidateIn(StrictIn):
    query = serializers.CharField(max_length=2000)
    document_id = serializers.UUIDField()
    chunk_id = serializers.IntegerField(required=False, min_value=1)
    verdict = serializers.ChoiceField(choices=["relevant", "wrong"])


def query_set_out(query_set: LabelledQuerySet) -> dict[str, Any]:
    return {
        "id": str(query_set.pk),
        "collection_id": str(query_set.collection_id),
        "name": query_set.name,
        "description": query_set.description,
        "queries": query_set.queries.count(),
        "created_at": query_set.created_at.isoformat(),
    }


def _refused(refused: EvaluationRefused) -> ApiError:
    return ApiError(refused.http_status, refused.code, refused.message)


def _not_found() -> ApiError:
    return ApiError(404, "not_found", gettext_noop("Not found."))


class EvaluationView(TenantView):
    def query_set(self, query_set_id: str) -> LabelledQuerySet:
        try:
            pk = uuid.UUID(str(query_set_id))
        except ValueError:
            raise _not_found() from None
        found = LabelledQuerySet.objects.filter(tenant=self.tenant, pk=pk).first()
        if found is None:
            raise _not_found()
        return found

    def run(self, run_id: str) -> EvaluationRun:
        try:
            pk = uuid.UUID(str(run_id))
        except ValueError:
            raise _not_found() from None
        found = EvaluationRun.objects.filter(tenant=self.tenant, pk=pk).first()
        if found is None:
            raise _not_found()
        return found


class QuerySetsView(EvaluationView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="query_sets_list", responses={200: QuerySetOut(many=True), **ERRORS})
    def get(self, request: Request, collection_id: str) -> Response:
        collection = collection_of(self.tenant, collection_id)
        if collection is None:
            raise _not_found()
        return Response([query_set_out(q) for q in LabelledQuerySet.objects.filter(collection=collection)])

    @extend_schema(request=QuerySetIn, responses={201: QuerySetOut, **ERRORS})
    def post(self, request: Request, collection_id: str) -> Response:
        collection = collection_of(self.tenant, collection_id)
        if collection is None:
            raise _not_found()
        form = QuerySetIn(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            query_set = query_set_create(collection=collection, **form.validated_data)
        except EvaluationRefused as refused:
            raise _refused(refused) from None
        return Response(query_set_out(query_set), status=status.HTTP_201_CREATED)


class QuerySetView(EvaluationView):
    @extend_schema(responses={200: QuerySetOut, **ERRORS})
    def get(self, request: Request, query_set_id: str) -> Response:
        return Response(query_set_out(self.query_set(query_set_id)))


class QueriesImportView(EvaluationView):
    parser_classes = [JsonLinesParser, JsonlAlias, MultiPartParser]

    @extend_schema(
        request={"application/x-ndjson": OpenApiTypes.BINARY, "multipart/form-data": OpenApiTypes.BINARY},
        responses={201: QuerySetOut, **ERRORS},
    )
    def post(self, request: Request, query_set_id: str) -> Response:
        """Add labelled queries from JSON Lines (the body, or a multipart ``file``); all or
        nothing: a bad line is a 400 naming it, and nothing is added."""
        query_set = self.query_set(query_set_id)
        data = request.data
        if not isinstance(data, bytes):
            upload = data.get("file") if hasattr(data, "get") else None
            if upload is None:
                raise ApiError(
                    400,
                    "invalid_import",
                    gettext_noop("Send JSON Lines as the body or as a file named 'file'."),
                )
            data = upload.read(MAX_IMPORT_BYTES + 1)
        if len(data) > MAX_IMPORT_BYTES:
            raise ApiError(413, "file_too_large", gettext_noop("An import may be at most 5 MB."))
        try:
            query_set_import(query_set=query_set, data=data, visible=visible_documents(self.viewer))
        except LabelsInvalid as bad:
            raise ApiError(
                400,
                "invalid_line",
                f"Line {bad.line}: {bad.reason}. Nothing was imported.",
                {"line": bad.line, "reason": bad.reason},
            ) from None
        return Response(query_set_out(query_set), status=status.HTTP_201_CREATED)


class RunsView(EvaluationView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="evaluation_runs_list", responses={200: EvaluationRunOut(many=True), **ERRORS}
    )
    def get(self, request: Request, query_set_id: str) -> Response:
        query_set = self.query_set(query_set_id)
        return Response(
            [evaluation_run_status(r) for r in EvaluationRun.objects.filter(query_set=query_set)[:100]]
        )

    @extend_schema(request=RunIn, responses={202: EvaluationRunOut, **ACTION_ERRORS})
    def post(self, request: Request, query_set_id: str) -> Response:
        """Start an evaluation run (a job) of the set: default the active embedder, every mode."""
        query_set = self.query_set(query_set_id)
        form = RunIn(data=request.data if isinstance(request.data, dict) else {})
        form.is_valid(raise_exception=True)
        try:
            run = evaluation_start(
                query_set=query_set,
                embedder=form.validated_data.get("embedder", ""),
                modes=form.validated_data.get("modes"),
                actor=Actor.USER,
                actor_name=request.user.get_username(),
            )
        except EvaluationRefused as refused:
            raise _refused(refused) from None
        except QueueFull:
            raise ApiError(
                429, "quota_exceeded", gettext_noop("The workspace's queue is full. Try again later.")
            ) from None
        return Response(evaluation_run_status(run), status=status.HTTP_202_ACCEPTED)


class RunView(EvaluationView):
    @extend_schema(responses={200: EvaluationRunOut, **ERRORS})
    def get(self, request: Request, run_id: str) -> Response:
        return Response(evaluation_run_status(self.run(run_id)))


class CompareView(EvaluationView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, **ERRORS})
    def get(self, request: Request, run_id: str, other_id: str) -> Response:
        """``other`` against ``run``: deltas per mode and language, per-query wins and losses."""
        base, other = self.run(run_id), self.run(other_id)
        if base.query_set_id != other.query_set_id:
            raise ApiError(
                400, "different_query_sets", gettext_noop("Only runs of the same query set compare.")
            )
        if not base.summary or not other.summary:
            raise ApiError(409, "run_unfinished", gettext_noop("Both runs must have finished."))
        viewer = self.viewer
        shown = None if viewer.principals is None else partial(queries_in_sight, viewer)
        compared = runs_compare(base, other, shown=shown)
        return Response({"base": str(base.pk), "other": str(other.pk), **compared})


class CandidatesView(TenantView):
    parser_classes = [JSONParser]

    @extend_schema(request=CandidateIn, responses={201: OpenApiTypes.OBJECT, **ERRORS})
    def post(self, request: Request) -> Response:
        """A verdict on a search hit; an operator confirms it into a query set (not used before)."""
        form = CandidateIn(data=request.data)
        form.is_valid(raise_exception=True)
        self.document(form.validated_data["document_id"])  # one the caller may not see: 404
        try:
            candidate = candidate_record(tenant=self.tenant, user=request.user, **form.validated_data)
        except EvaluationRefused as refused:
            raise _refused(refused) from None
        return Response({"id": candidate.pk, "confirmed": False}, status=status.HTTP_201_CREATED)
