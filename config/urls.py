from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("documents.api.urls")),
    path("v1/", include("documents.api_v1.urls")),  # OpenAI-compatible vector-store API
    path("metrics", include("jobs.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("documents.urls")),
]

handler404 = "documents.site_errors.not_found"
handler500 = "documents.site_errors.server_error"
