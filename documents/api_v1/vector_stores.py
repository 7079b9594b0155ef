"""``/v1/vector_stores``: stores (= collections), their files (= their documents, processed by
a job, whichever API made them), file batches and search, in the shapes of OpenAI's Vector Stores
API.

Polling is cheap: a file's retrieve is one query (the document with its version and job joined)
besides authentication; the answer carries ``openai-poll-after-ms`` so the SDK
polls at our pace.
"""

# long-module: the OpenAI Vector Stores resource family (stores, files, batches, search) in the
# order of OpenAI's reference, each view a thin parse-then-service call.

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.parsers import BoundedJSONParser
from documents.api_v1 import schema as sc
from documents.api_v1.base import V1_ERRORS, V1View
from documents.api_v1.errors import V1Error, not_found
from documents.api_v1.files import LIST_PARAMETERS, DeletedOut
from documents.api_v1.pagination import keyset_page
from documents.models import Chunk, Collection, Document, VectorStoreFileBatch
from documents.retrieval.filters import parse_filter
from documents.retrieval.fusion import Weights
from documents.retrieval.neighbours import MAX_NEIGHBOURS, neighbours_of
from documents.search import search
from documents.selectors import hides_documents, visible_documents
from documents.services import vector_stores as vs
from documents.services.access import AccessInputError, check_principals
from documents.services.attributes import document_update
from documents.services.collections import collections_of
from documents.throttles import SEARCH_THROTTLES, UPLOAD_THROTTLES, throttle_charge
from documents.visibility import visible_files

POLL_AFTER_MS = "500"
FILE_LIST = [
    *LIST_PARAMETERS,
    OpenApiParameter("filter", str, enum=["in_progress", "completed", "failed", "cancelled"]),
]


def ok(serializer: Any) -> dict[int, Any]:
    return {200: serializer, **V1_ERRORS}


MAX_RESULTS = 50


def _ts(value: Any) -> int | None:
    return int(value.timestamp()) if value is not None else None


def store_out(collection: Collection, visible: QuerySet[Document]) -> dict[str, Any]:
    """The store as OpenAI shapes it; its file counts count what the caller may see."""
    found = vs.settings_of(collection)
    counts = vs.file_counts(vs.live_files(collection, visible))
    days = found.expires_after_days
    return {
        "id": vs.store_ref(collection),
        "object": "vector_store",
        "created_at": _ts(collection.created_at),
        "name": collection.name,
        "usage_bytes": vs.usage_bytes(collection),
        "file_counts": counts,
        "status": "in_progress" if counts["in_progress"] else "completed",
        "expires_after": {"anchor": "last_active_at", "days": days} if days else None,
        "expires_at": _ts(found.expires_at),
        "last_active_at": _ts(found.last_active_at),
        "metadata": collection.metadata or {},
    }


def file_out(attached: Document) -> dict[str, Any]:
    job = vs.job_of(attached)
    version = attached.latest_version
    return {
        "id": attached.file_id,
        "object": "vector_store.file",
        "created_at": _ts(attached.created_at),
        "vector_store_id": f"vs_{attached.collection_id.hex}",
        "status": vs.file_status(job),
        "last_error": vs.last_error(job),
        "usage_bytes": version.size if version is not None else 0,
        "attributes": attached.attributes or {},
        "chunking_strategy": vs.chunking_used(attached),
        # Ours (the SDK ignores unknown fields): the real stage and progress of the job.
        "document_id": str(attached.pk),
        "job_id": str(job.pk) if job is not None else None,
        "stage": job.stage if job is not None else None,
        "job_status": job.status if job is not None else None,
        "progress": round(job.progress, 4) if job is not None else 0.0,
    }


def body_of(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise V1Error(400, "invalid_body", "The body must be a JSON object.")
    return request.data


MAX_STORE_FILE_IDS = 100  # file_ids of a vector store's creation
MAX_BATCH_FILES = 500  # file_ids or files of one file batch, as OpenAI allows
MAX_QUERY_STRINGS = 20  # strings of a search query given as a list


def bounded_list(body: dict[str, Any], field: str, limit: int) -> list[Any]:
    """``body[field]`` as a list of at most ``limit`` items ([] when absent), else a 400."""
    value = body.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise V1Error(400, "invalid_type", f"{field} must be a list.", field)
    if len(value) > limit:
        raise V1Error(400, "too_many_items", f"{field} holds at most {limit} items.", field)
    return value


def _store_error(exc: vs.StoreInputError) -> V1Error:
    return V1Error(exc.http_status, exc.code, exc.message, exc.param)


class StoreView(V1View):
    parser_classes = [BoundedJSONParser]

    def store(self, ref: str) -> Collection:
        found = vs.store_of(self.tenant, ref)
        if found is None:
            raise not_found("vector store", ref)
        return found

    @property
    def visible(self) -> QuerySet[Document]:
        return visible_documents(self.viewer)

    def attached(self, collection: Collection, file_id: str) -> Document:
        found = vs.live_files(collection, self.visible).filter(file_id=file_id).first()
        if found is None:
            raise not_found("file", file_id)
        return found

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["openai-poll-after-ms"] = POLL_AFTER_MS
        return response


class StoresView(StoreView):
    @extend_schema(
        operation_id="v1_vector_stores_create", request=sc.VectorStoreIn, responses=ok(sc.VectorStoreOut)
    )
    def post(self, request: Request) -> Response:
        """Create a vector store: name, metadata, expires_after, chunking_strategy, file_ids."""
        body = body_of(request)
        file_ids = bounded_list(body, "file_ids", MAX_STORE_FILE_IDS)
        # each attached file is an upload's worth of work: it counts against the upload rate
        throttle_charge(request, self, UPLOAD_THROTTLES, len(file_ids))
        try:
            collection = vs.store_create(
                tenant=self.tenant,
                name=body.get("name"),
                metadata=body.get("metadata"),
                expires_after=body.get("expires_after"),
                chunking_strategy=body.get("chunking_strategy"),
            )
        except vs.StoreInputError as exc:
            raise _store_error(exc) from None
        for file_id in file_ids:
            self.attach(collection, {"file_id": file_id})
        return Response(store_out(collection, self.visible))

    def attach(self, collection: Collection, item: dict[str, Any], batch: Any = None) -> Document:
        # An extension of this platform (OpenAI has none): the new document's own access list.
        access = None
        if item.get("access") is not None:
            try:
                access = check_principals(self.tenant, item["access"])
            except AccessInputError as exc:
                raise V1Error(400, exc.code, exc.message, "access") from None
        try:
            attached = vs.file_attach(
                tenant=self.tenant,
                collection=collection,
                file_id=item.get("file_id"),
                attributes=item.get("attributes"),
                chunking_strategy=item.get("chunking_strategy"),
                user=self.request.user,
                batch=batch,
                access=access,
                files=visible_files(self.viewer),
            )
        except vs.StoreInputError as exc:
            raise _store_error(exc) from None
        if not self.visible.filter(pk=attached.pk).exists():
            # Attached before, with a list that leaves the caller out: as if unknown.
            raise not_found("file", str(item.get("file_id"))[:80])
        return attached

    @extend_schema(
        operation_id="v1_vector_stores_list", parameters=LIST_PARAMETERS, responses=ok(sc.VectorStoreListOut)
    )
    def get(self, request: Request) -> Response:
        def cursor(ref: str) -> Q:
            found = vs.store_of(self.tenant, ref)
            return Q(pk=found.pk) if found is not None else Q(pk__in=[])

        queryset = collections_of(self.tenant).select_related("vector_store")
        visible = self.visible
        return Response(keyset_page(queryset, request.query_params, lambda c: store_out(c, visible), cursor))


class StoreDetailView(StoreView):
    @extend_schema(operation_id="v1_vector_stores_retrieve", responses=ok(sc.VectorStoreOut))
    def get(self, request: Request, store_id: str) -> Response:
        return Response(store_out(self.store(store_id), self.visible))

    @extend_schema(
        operation_id="v1_vector_stores_update",
        request=sc.VectorStoreUpdateIn,
        responses=ok(sc.VectorStoreOut),
    )
    def post(self, request: Request, store_id: str) -> Response:
        """Change name, metadata and/or expires_after."""
        collection = self.store(store_id)
        body = body_of(request)
        fields = {k: body[k] for k in ("name", "metadata", "expires_after") if k in body}
        try:
            vs.store_update(collection=collection, **fields)
        except vs.StoreInputError as exc:
            raise _store_error(exc) from None
        return Response(store_out(self.store(store_id), self.visible))

    @extend_schema(operation_id="v1_vector_stores_delete", responses=ok(DeletedOut))
    def delete(self, request: Request, store_id: str) -> Response:
        """Delete the store and every document in it (through the delete service)."""
        collection = self.store(store_id)
        if hides_documents(self.viewer, collection.pk):
            raise V1Error(
                403,
                "not_allowed",
                "Only a workspace admin deletes a vector store that holds files you cannot see.",
                "vector_store_id",
            )
        vs.store_delete(collection=collection, user=request.user)
        return Response({"id": store_id, "object": "vector_store.deleted", "deleted": True})


class StoreFilesView(StoresView):
    def get_throttles(self) -> list[Any]:
        return [t() for t in UPLOAD_THROTTLES] if self.request.method == "POST" else []

    @extend_schema(
        operation_id="v1_vector_store_files_create",
        request=sc.VectorStoreFileIn,
        responses=ok(sc.VectorStoreFileOut),
    )
    def post(self, request: Request, store_id: str) -> Response:  # type: ignore[override]
        """Attach a file (file_id, attributes, chunking_strategy): a document and its job."""
        return Response(file_out(self.attach(self.store(store_id), body_of(request))))

    @extend_schema(
        operation_id="v1_vector_store_files_list",
        parameters=FILE_LIST,
        responses=ok(sc.VectorStoreFileListOut),
    )
    def get(self, request: Request, store_id: str) -> Response:  # type: ignore[override]
        files = vs.live_files(self.store(store_id), self.visible)
        return Response(file_page(files, request))


def file_page(files: Any, request: Request) -> dict[str, Any]:
    wanted = request.query_params.get("filter")
    if wanted:
        statuses = [s for s, word in vs.FILE_STATUS.items() if word == wanted]
        if wanted == "in_progress":
            files = files.exclude(latest_version__job__status__in=list(vs.FILE_STATUS))
        elif statuses:
            files = files.filter(latest_version__job__status__in=statuses)
        else:
            raise V1Error(
                400, "invalid_filter", "filter is in_progress, completed, failed or cancelled.", "filter"
            )
    return keyset_page(files, request.query_params, file_out, lambda ref: Q(file_id=ref))


class StoreFileView(StoreView):
    @extend_schema(operation_id="v1_vector_store_files_retrieve", responses=ok(sc.VectorStoreFileOut))
    def get(self, request: Request, store_id: str, file_id: str) -> Response:
        """The file's status: one query besides authentication (the SDK polls this)."""
        found = vs.attached_file(self.tenant, store_id, file_id, self.visible)
        if found is None:
            raise not_found("file", file_id)
        return Response(file_out(found))

    @extend_schema(
        operation_id="v1_vector_store_files_update",
        request=sc.AttributesIn,
        responses=ok(sc.VectorStoreFileOut),
    )
    def post(self, request: Request, store_id: str, file_id: str) -> Response:
        """Replace the file's attributes (they are its document's attributes)."""
        attached = self.attached(self.store(store_id), file_id)
        body = body_of(request)
        if not isinstance(body.get("attributes"), dict):
            raise V1Error(400, "invalid_attributes", "Send attributes as an object.", "attributes")
        document_update(document=attached, attributes=body["attributes"])
        attached.refresh_from_db(fields=["attributes"])
        return Response(file_out(attached))

    @extend_schema(operation_id="v1_vector_store_files_delete", responses=ok(DeletedOut))
    def delete(self, request: Request, store_id: str, file_id: str) -> Response:
        """Remove the file from the store: its document is deleted (gone from search at once)."""
        attached = self.attached(self.store(store_id), file_id)
        vs.file_detach(tenant=self.tenant, attached=attached, user=request.user)
        return Response({"id": file_id, "object": "vector_store.file.deleted", "deleted": True})


class StoreFileContentView(StoreView):
    @extend_schema(operation_id="v1_vector_store_files_content", responses=ok(sc.ContentPageOut))
    def get(self, request: Request, store_id: str, file_id: str) -> Response:
        """The text of the file's chunks in the published (verified) version; none before."""
        attached = self.attached(self.store(store_id), file_id)
        published = attached.published_version_id
        texts = Chunk.objects.filter(version_id=published).order_by("ordinal").values_list("text", flat=True)
        data = [{"type": "text", "text": t} for t in texts] if published else []
        return Response(
            {"object": "vector_store.file_content.page", "data": data, "has_more": False, "next_page": None}
        )


class BatchesView(StoresView):
    http_method_names = ["post", "options"]

    def get_throttles(self) -> list[Any]:
        return [t() for t in UPLOAD_THROTTLES]

    @extend_schema(
        operation_id="v1_file_batches_create", request=sc.FileBatchIn, responses=ok(sc.FileBatchOut)
    )
    def post(self, request: Request, store_id: str) -> Response:  # type: ignore[override]
        """Attach many files: ``file_ids`` (with shared attributes) or ``files`` (each its own)."""
        collection = self.store(store_id)
        body = body_of(request)
        items = bounded_list(body, "files", MAX_BATCH_FILES) if "files" in body else None
        if items is None:
            shared = {k: body.get(k) for k in ("attributes", "chunking_strategy")}
            items = [{"file_id": f, **shared} for f in bounded_list(body, "file_ids", MAX_BATCH_FILES)]
        if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
            raise V1Error(400, "invalid_files", "Send file_ids or files (a non-empty list).", "file_ids")
        # the request counted once; each further file is one more upload's worth of work
        throttle_charge(request, self, UPLOAD_THROTTLES, len(items) - 1)
        batch = VectorStoreFileBatch.objects.create(collection=collection)
        for item in items:
            self.attach(collection, item, batch)
        return Response(batch_out(batch, self.visible))


def batch_out(batch: VectorStoreFileBatch, visible: QuerySet[Document]) -> dict[str, Any]:
    counts = vs.file_counts(vs.live_files(batch.collection, visible).filter(file_batch=batch))
    if counts["in_progress"]:
        status = "in_progress"
    elif batch.cancel_requested_at is not None:
        status = "cancelled"
    else:
        status = "completed"
    return {
        "id": batch.pk,
        "object": "vector_store.files_batch",
        "created_at": _ts(batch.created_at),
        "vector_store_id": f"vs_{batch.collection_id.hex}",
        "status": status,
        "file_counts": counts,
    }


class BatchView(StoreView):
    def batch(self, store_id: str, batch_id: str) -> VectorStoreFileBatch:
        collection = self.store(store_id)
        found = VectorStoreFileBatch.objects.filter(collection=collection, pk=batch_id).first()
        if found is None:
            raise not_found("file batch", batch_id)
        found.collection = collection
        return found

    @extend_schema(operation_id="v1_file_batches_retrieve", responses=ok(sc.FileBatchOut))
    def get(self, request: Request, store_id: str, batch_id: str) -> Response:
        return Response(batch_out(self.batch(store_id, batch_id), self.visible))


class BatchCancelView(BatchView):
    http_method_names = ["post", "options"]

    @extend_schema(operation_id="v1_file_batches_cancel", request=None, responses=ok(sc.FileBatchOut))
    def post(self, request: Request, store_id: str, batch_id: str) -> Response:
        batch = self.batch(store_id, batch_id)
        vs.batch_cancel(batch=batch, user=request.user, visible=self.visible)
        batch.refresh_from_db()
        return Response(batch_out(batch, self.visible))


class BatchFilesView(BatchView):
    @extend_schema(
        operation_id="v1_file_batches_files", parameters=FILE_LIST, responses=ok(sc.VectorStoreFileListOut)
    )
    def get(self, request: Request, store_id: str, batch_id: str) -> Response:
        batch = self.batch(store_id, batch_id)
        return Response(
            file_page(vs.live_files(batch.collection, self.visible).filter(file_batch=batch), request)
        )


def _fraction(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _hybrid_weights(raw: Any, collection: Collection) -> Weights:
    """OpenAI's ``ranking_options.hybrid_search`` onto the fusion's weights; absent, the store's
    own (its collection's ``text_weight`` / ``embedding_weight``)."""
    if raw is None:
        return Weights(text=collection.text_weight, embedding=collection.embedding_weight)
    field = "ranking_options.hybrid_search"
    if not isinstance(raw, dict) or set(raw) - {"embedding_weight", "text_weight"}:
        raise V1Error(
            400, "invalid_ranking_options", "hybrid_search has embedding_weight and text_weight.", field
        )
    embedding = raw.get("embedding_weight", collection.embedding_weight)
    text = raw.get("text_weight", collection.text_weight)
    if not (_fraction(embedding) and _fraction(text)) or embedding == text == 0:
        raise V1Error(400, "invalid_ranking_options", "hybrid_search weights are 0-1, not both 0.", field)
    return Weights(text=float(text), embedding=float(embedding))


class SearchView(StoreView):
    throttle_classes = SEARCH_THROTTLES

    @extend_schema(
        operation_id="v1_vector_stores_search", request=sc.SearchIn, responses=ok(sc.SearchPageOut)
    )
    def post(self, request: Request, store_id: str) -> Response:
        """Hybrid search inside the store: query (text or list), filters, max_num_results,
        ranking_options: score_threshold on the fused score (0-1, normalised the same in every
        query), hybrid_search {embedding_weight, text_weight} (0-1 each; default the store's own
        weights); rewrite_query is accepted and does nothing. The extension ``neighbours`` (0-5)
        adds to each result the chunks before and after it in its file, in OpenAI's content
        shape."""
        collection = self.store(store_id)
        body = body_of(request)
        raw_query = body.get("query")
        if isinstance(raw_query, list):
            bounded_list(body, "query", MAX_QUERY_STRINGS)
        if isinstance(raw_query, list) and all(isinstance(q, str) for q in raw_query):
            query = " ".join(raw_query)
        elif isinstance(raw_query, str):
            query = raw_query
        else:
            raise V1Error(400, "invalid_query", "query is a string or a list of strings.", "query")
        limit = body.get("max_num_results", 10)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RESULTS:
            raise V1Error(400, "invalid_max_num_results", "max_num_results is 1-50.", "max_num_results")
        ranking = body.get("ranking_options") or {}
        if not isinstance(ranking, dict):
            raise V1Error(400, "invalid_ranking_options", "ranking_options is an object.", "ranking_options")
        threshold = ranking.get("score_threshold", 0)
        if not _fraction(threshold):
            raise V1Error(400, "invalid_ranking_options", "score_threshold is 0-1.", "ranking_options")
        if ranking.get("ranker", "auto") not in ("auto", "default-2024-11-15", "none"):
            raise V1Error(
                400, "invalid_ranking_options", "ranker is auto or default-2024-11-15.", "ranking_options"
            )
        # An extension of this platform (OpenAI has none): the chunks around each hit.
        neighbours = body.get("neighbours", 0)
        if (
            not isinstance(neighbours, int)
            or isinstance(neighbours, bool)
            or not 0 <= neighbours <= MAX_NEIGHBOURS
        ):
            raise V1Error(400, "invalid_neighbours", f"neighbours is 0-{MAX_NEIGHBOURS}.", "neighbours")
        weights = _hybrid_weights(ranking.get("hybrid_search"), collection)
        filters = parse_filter(body["filters"]) if body.get("filters") is not None else None
        pk = collection.pk.hex if connection.vendor == "sqlite" else collection.pk
        hits = search(
            self.tenant,
            query[:1000],
            limit,
            filters=filters,
            where=[("d.collection_id = %s", [pk])],
            weights=weights,
            min_score=threshold,
            viewer=self.viewer,
        )
        names = dict(
            Document.objects.filter(pk__in=[h.document_id for h in hits]).values_list("pk", "file_id")
        )
        vs.store_touch(collection)
        data = [
            {
                "file_id": names.get(h.document_id, str(h.document_id)),
                "filename": h.document_title,
                "score": round(h.score, 6),
                "attributes": h.attributes,
                "content": [{"type": "text", "text": h.snippet}],
            }
            for h in hits
        ]
        if neighbours:
            for item, around in zip(data, neighbours_of(hits, neighbours), strict=True):
                item["neighbours"] = {
                    "before": [{"type": "text", "text": chunk.text} for chunk in around.before],
                    "after": [{"type": "text", "text": chunk.text} for chunk in around.after],
                }
        return Response(
            {
                "object": "vector_store.search_results.page",
                "search_query": query,
                "data": data,
                "has_more": False,
                "next_page": None,
            }
        )
