"""The HTML pages (the API lives under ``/api/``, see ``documents/api/urls.py``)."""

import re

from django.conf import settings
from django.urls import URLPattern, path, re_path

from documents import views, views_collections, views_lifecycle

JOB = "documents/<str:document_id>/jobs/<str:job_id>"

urlpatterns: list[URLPattern] = [
    path("", views.document_list, name="documents"),
    path("documents/<str:document_id>/", views.document_detail, name="document"),
    path("documents/<str:document_id>/versions", views.version_upload, name="document-versions"),
    path(f"{JOB}/cancel", views.job_cancel_view, name="job-cancel"),
    path(f"{JOB}/retry", views.job_retry_view, name="job-retry"),
    path("search", views.search_page, name="search"),
    path("collections/", views_collections.collection_list, name="collections"),
    path("collections/<str:collection_id>/", views_collections.collection_detail, name="collection"),
    path(
        "documents/<str:document_id>/versions/<int:number>/chunks",
        views_collections.version_chunks,
        name="version-chunks",
    ),
    path("documents/<str:document_id>/delete", views_lifecycle.document_delete_view, name="document-delete"),
]

# Static files are served here only when STATIC_URL is a local path (see views.static_file).
if not re.match(r"^(https?:)?//", settings.STATIC_URL):
    prefix = re.escape(settings.STATIC_URL.strip("/"))
    urlpatterns.append(re_path(rf"^{prefix}/(?P<path>.+)$", views.static_file, name="static-file"))
