"""The HTML pages (the API lives under ``/api/``, see ``documents/api/urls.py``)."""

import re

from django.conf import settings
from django.urls import URLPattern, path, re_path

from documents.pages import collections, document, document_list, evaluation, lifecycle, sources

JOB = "documents/<str:document_id>/jobs/<str:job_id>"

urlpatterns: list[URLPattern] = [
    path("", document_list.document_list, name="documents"),
    path("documents/<str:document_id>/", document.document_detail, name="document"),
    path("documents/<str:document_id>/versions", document.version_upload, name="document-versions"),
    path(f"{JOB}/cancel", document.job_cancel_view, name="job-cancel"),
    path(f"{JOB}/retry", document.job_retry_view, name="job-retry"),
    path(
        "documents/<str:document_id>/versions/<int:number>/process-again",
        lifecycle.version_process_again_view,
        name="version-process-again",
    ),
    path("search", document.search_page, name="search"),
    path("collections/", collections.collection_list, name="collections"),
    path("sources/", sources.sources_page, name="sources"),
    path("sources/<str:source_id>/", sources.source_page, name="source"),
    path("sources/<str:source_id>/sync", sources.source_sync, name="source-sync"),
    path("collections/<str:collection_id>/", collections.collection_detail, name="collection"),
    path(
        "documents/<str:document_id>/versions/<int:number>/chunks",
        collections.version_chunks,
        name="version-chunks",
    ),
    path(
        "collections/<str:collection_id>/evaluation",
        evaluation.evaluation_page,
        name="collection-evaluation",
    ),
    path("evaluation/runs/<str:run_id>", evaluation.run_page, name="evaluation-run"),
    path(
        "evaluation/runs/<str:run_id>/compare/<str:other_id>",
        evaluation.compare_page,
        name="evaluation-compare",
    ),
    path("search/verdict", evaluation.verdict, name="search-verdict"),
    path("documents/<str:document_id>/delete", lifecycle.document_delete_view, name="document-delete"),
]

# Static files are served here only when STATIC_URL is a local path (pages/document.py: static_file).
if not re.match(r"^(https?:)?//", settings.STATIC_URL):
    prefix = re.escape(settings.STATIC_URL.strip("/"))
    urlpatterns.append(re_path(rf"^{prefix}/(?P<path>.+)$", document.static_file, name="static-file"))
