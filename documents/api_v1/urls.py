"""Routes of /v1, spelt as the OpenAI SDK requests them (no trailing slash)."""

from django.urls import path

from documents.api_v1 import files

urlpatterns = [
    path("files", files.FilesView.as_view(), name="v1-files"),
    path("files/<str:file_id>", files.FileView.as_view(), name="v1-file"),
    path("files/<str:file_id>/content", files.FileContentView.as_view(), name="v1-file-content"),
]
