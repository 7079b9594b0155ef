from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from documents.api import sse, views

JOB = "documents/<str:document_id>/jobs/<str:job_id>"

urlpatterns = [
    path("documents/", views.DocumentsView.as_view(), name="api-documents"),
    path("documents/<str:document_id>/", views.DocumentView.as_view(), name="api-document"),
    path("documents/<str:document_id>/versions/", views.VersionsView.as_view(), name="api-versions"),
    path(JOB, views.JobView.as_view(), name="api-job"),
    path(f"{JOB}/cancel", views.JobCancelView.as_view(), name="api-job-cancel"),
    path(f"{JOB}/retry", views.JobRetryView.as_view(), name="api-job-retry"),
    path(f"{JOB}/events", sse.job_events, name="api-job-events"),
    path("search", views.SearchView.as_view(), name="api-search"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
