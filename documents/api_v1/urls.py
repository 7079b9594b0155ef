"""Routes of /v1, spelt as the OpenAI SDK requests them (no trailing slash)."""

from django.urls import path

from documents.api_v1 import files
from documents.api_v1 import vector_stores as v

VS = "vector_stores/<str:store_id>"

urlpatterns = [
    path("files", files.FilesView.as_view(), name="v1-files"),
    path("files/<str:file_id>", files.FileView.as_view(), name="v1-file"),
    path("files/<str:file_id>/content", files.FileContentView.as_view(), name="v1-file-content"),
    path("vector_stores", v.StoresView.as_view(), name="v1-vector-stores"),
    path(VS, v.StoreDetailView.as_view(), name="v1-vector-store"),
    path(f"{VS}/search", v.SearchView.as_view(), name="v1-vector-store-search"),
    path(f"{VS}/files", v.StoreFilesView.as_view(), name="v1-vector-store-files"),
    path(f"{VS}/files/<str:file_id>", v.StoreFileView.as_view(), name="v1-vector-store-file"),
    path(f"{VS}/files/<str:file_id>/content", v.StoreFileContentView.as_view()),
    path(f"{VS}/file_batches", v.BatchesView.as_view(), name="v1-file-batches"),
    path(f"{VS}/file_batches/<str:batch_id>", v.BatchView.as_view(), name="v1-file-batch"),
    path(f"{VS}/file_batches/<str:batch_id>/cancel", v.BatchCancelView.as_view()),
    path(f"{VS}/file_batches/<str:batch_id>/files", v.BatchFilesView.as_view()),
]
