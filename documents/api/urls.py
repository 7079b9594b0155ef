from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from documents.api import batches, collections, inspection, sse, views, webhooks

JOB = "documents/<str:document_id>/jobs/<str:job_id>"

urlpatterns = [
    path("documents/", views.DocumentsView.as_view(), name="api-documents"),
    path("documents/<str:document_id>/", views.DocumentView.as_view(), name="api-document"),
    path("documents/<str:document_id>/versions/", views.VersionsView.as_view(), name="api-versions"),
    # Lifecycle: both slash forms, without a redirect (it would drop the DELETE).
    path("documents/<str:document_id>", views.DocumentViewWithoutSlash.as_view()),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/?$",
        views.VersionView.as_view(),
        name="api-version",
    ),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/chunks/?$",
        inspection.ChunksView.as_view(),
        name="api-version-chunks",
    ),
    re_path(
        r"^documents/(?P<document_id>[^/]+)/versions/(?P<number>[0-9]+)/text/?$",
        inspection.TextView.as_view(),
        name="api-version-text",
    ),
    path(JOB, views.JobView.as_view(), name="api-job"),
    path(f"{JOB}/cancel", views.JobCancelView.as_view(), name="api-job-cancel"),
    path(f"{JOB}/retry", views.JobRetryView.as_view(), name="api-job-retry"),
    path(f"{JOB}/events", sse.job_events, name="api-job-events"),
    path("search", views.SearchView.as_view(), name="api-search"),
    re_path(r"^batches/?$", batches.BatchesView.as_view(), name="api-batches"),
    re_path(r"^batches/(?P<batch_id>[^/]+)/?$", batches.BatchView.as_view(), name="api-batch"),
    re_path(
        r"^batches/(?P<batch_id>[^/]+)/cancel/?$", batches.BatchCancelView.as_view(), name="api-batch-cancel"
    ),
    re_path(r"^webhooks/?$", webhooks.WebhooksView.as_view(), name="api-webhooks"),
    re_path(r"^webhooks/(?P<endpoint_id>[^/]+)/?$", webhooks.WebhookView.as_view(), name="api-webhook"),
    # Collections: both slash forms, without a redirect (it would drop a PATCH or DELETE body).
    re_path(r"^collections/?$", collections.CollectionsView.as_view(), name="api-collections"),
    re_path(
        r"^collections/(?P<collection_id>[^/]+)/?$",
        collections.CollectionView.as_view(),
        name="api-collection",
    ),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
