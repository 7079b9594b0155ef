from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("documents.api.urls")),
]

handler404 = "documents.api.errors.not_found"
handler500 = "documents.api.errors.server_error"
