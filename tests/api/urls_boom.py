"""The project's URLs plus views that fail, to see what a client gets from a 500.

The error handlers are the project's own (``config.urls``), not replacements.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import handler404, handler500
from config.urls import urlpatterns as project_urlpatterns

# What an exception's text may carry: a path, SQL, a host and a credential.
SECRET = "SELECT password FROM auth_user -- /work/main/var/secret.sqlite3 at db.internal:5432 token=hunter2"


class DrfBoom(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError(SECRET)


def plain_boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(SECRET)


class SqlBoom(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        with connection.cursor() as cursor:
            cursor.execute("SELECT secret_column FROM no_such_table_for_boom")
        return Response({})


urlpatterns = [
    path("api/boom/drf", DrfBoom.as_view()),
    path("api/boom/plain", plain_boom),
    path("api/boom/sql", SqlBoom.as_view()),
    *project_urlpatterns,
]

__all__ = ["handler404", "handler500", "urlpatterns"]
