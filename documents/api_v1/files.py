"""``/v1/files``: upload, list, retrieve, delete and download file objects (OpenAI's Files API).

A document made outside /v1 (through /api, the pages, the CLI or a source) has no file object, yet
it is a file of its collection's store and search names it by its ``file_id``: retrieving that id
answers with the document's bytes as a file, so every id /v1 hands out can be looked up here.

A caller sees the file objects they uploaded and those a document they may see was made from
(``documents.visibility.visible_files``); any other id answers as an unknown one."""

from __future__ import annotations

from typing import Any

from django.http import FileResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api_v1.base import V1_ERRORS, V1View
from documents.api_v1.errors import V1Error, not_found
from documents.api_v1.pagination import keyset_page
from documents.models import Document, FileObject
from documents.selectors import visible_documents
from documents.services.files import NOT_DOWNLOADABLE, PURPOSES, file_create, file_delete, file_open
from documents.services.vector_stores import document_of_file
from documents.throttles import UPLOAD_THROTTLES
from documents.visibility import visible_files

DOWNLOAD_PIECE_BYTES = 64 * 1024


class FileIn(serializers.Serializer):
    file = serializers.FileField()
    purpose = serializers.ChoiceField(choices=PURPOSES)


class FileOut(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    bytes = serializers.IntegerField()
    created_at = serializers.IntegerField()
    filename = serializers.CharField()
    purpose = serializers.CharField()
    status = serializers.CharField()
    expires_at = serializers.IntegerField(allow_null=True)
    status_details = serializers.CharField(allow_null=True)


class FileListOut(serializers.Serializer):
    object = serializers.CharField()
    data = FileOut(many=True)  # type: ignore[assignment]
    first_id = serializers.CharField(allow_null=True)
    last_id = serializers.CharField(allow_null=True)
    has_more = serializers.BooleanField()


class DeletedOut(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    deleted = serializers.BooleanField()


LIST_PARAMETERS = [
    OpenApiParameter("limit", int, description="1-100 (20)"),
    OpenApiParameter("order", str, enum=["asc", "desc"]),
    OpenApiParameter("after", str, description="an id: the page after it"),
    OpenApiParameter("before", str, description="an id: the page before it"),
]


def file_out(obj: FileObject) -> dict[str, Any]:
    return {
        "id": obj.id,
        "object": "file",
        "bytes": obj.bytes,
        "created_at": int(obj.created_at.timestamp()),
        "filename": obj.filename,
        "purpose": obj.purpose,
        "status": "processed",  # stored; processing happens per vector store attachment
        "expires_at": None,
        "status_details": None,
    }


# A document's bytes are the document's: they go with it (through its store), never alone.
DOCUMENT_PURPOSE = "assistants"


def document_file_out(document: Document) -> dict[str, Any]:
    version = document.latest_version
    return {
        "id": document.file_id,
        "object": "file",
        "bytes": version.size if version is not None else 0,
        "created_at": int(document.created_at.timestamp()),
        "filename": version.original_name if version is not None else document.title,
        "purpose": DOCUMENT_PURPOSE,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


def any_file_of(view: V1View, file_id: str) -> FileObject | Document:
    """The file object the caller may see, or the live document they may see that has this file
    id without one."""
    obj = visible_files(view.viewer).filter(pk=file_id).first()
    found = obj if obj is not None else document_of_file(view.tenant, file_id, visible_documents(view.viewer))
    if found is None:
        raise not_found("file", file_id)
    return found


class FilesView(V1View):
    parser_classes = [MultiPartParser, FormParser]

    def get_throttles(self) -> list[Any]:
        return [t() for t in UPLOAD_THROTTLES] if self.request.method == "POST" else []

    @extend_schema(
        operation_id="v1_files_create",
        request={"multipart/form-data": FileIn},
        responses={200: FileOut, **V1_ERRORS, 413: V1_ERRORS[400]},
    )
    def post(self, request: Request) -> Response:
        """Upload a file (multipart ``file`` and ``purpose``); it is stored, not yet processed."""
        upload = request.FILES.get("file")
        if upload is None:
            raise V1Error(400, "missing_file", "Send the file as the multipart field 'file'.", "file")
        purpose = str(request.POST.get("purpose", ""))
        obj = file_create(
            tenant=self.tenant,
            user=request.user,
            data=upload.read(),
            filename=upload.name or "",
            purpose=purpose,
        )
        return Response(file_out(obj))

    @extend_schema(
        operation_id="v1_files_list",
        parameters=[*LIST_PARAMETERS, OpenApiParameter("purpose", str)],
        responses={200: FileListOut, **V1_ERRORS},
    )
    def get(self, request: Request) -> Response:
        queryset = visible_files(self.viewer)
        purpose = request.query_params.get("purpose")
        if purpose:
            queryset = queryset.filter(purpose=purpose)
        return Response(keyset_page(queryset, request.query_params, file_out))


class FileView(V1View):
    @extend_schema(operation_id="v1_files_retrieve", responses={200: FileOut, **V1_ERRORS})
    def get(self, request: Request, file_id: str) -> Response:
        found = any_file_of(self, file_id)
        return Response(file_out(found) if isinstance(found, FileObject) else document_file_out(found))

    @extend_schema(operation_id="v1_files_delete", responses={200: DeletedOut, **V1_ERRORS})
    def delete(self, request: Request, file_id: str) -> Response:
        """Delete a file object (documents made from it stay in their stores, as OpenAI's). A
        document's own file is refused: it is removed with the document, through its store."""
        if file_delete(tenant=self.tenant, file_id=file_id, files=visible_files(self.viewer)):
            return Response({"id": file_id, "object": "file", "deleted": True})
        document = document_of_file(self.tenant, file_id, visible_documents(self.viewer))
        if document is None:
            raise not_found("file", file_id)
        store = f"vs_{document.collection_id.hex}"
        raise V1Error(
            400,
            "file_in_vector_store",
            f"This file is a document of vector store {store}: remove it with "
            f"DELETE /v1/vector_stores/{store}/files/{file_id}.",
            "file_id",
        )


class FileContentView(V1View):
    @extend_schema(
        operation_id="v1_files_content",
        responses={(200, "application/octet-stream"): bytes, **V1_ERRORS},
    )
    def get(self, request: Request, file_id: str) -> FileResponse:
        """The file's bytes, unless its purpose is not downloadable (``assistants``, as OpenAI;
        a document's file is one of those)."""
        obj = any_file_of(self, file_id)
        if not isinstance(obj, FileObject) or obj.purpose in NOT_DOWNLOADABLE:
            purpose = obj.purpose if isinstance(obj, FileObject) else DOCUMENT_PURPOSE
            raise V1Error(
                400,
                "not_downloadable",
                f"Not allowed to download files of purpose: {purpose}.",
                "file_id",
            )
        # Streamed from storage a piece at a time: a client that reads slowly holds a few pieces
        # in the server, never the whole file (and is cut off after WEB_SEND_SECONDS).
        response = FileResponse(file_open(obj), content_type="application/octet-stream")
        response.block_size = DOWNLOAD_PIECE_BYTES
        response["Content-Disposition"] = "attachment"
        return response
