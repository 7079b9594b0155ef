"""The platform's urlconf plus two bench-only endpoints (never served in production).

- ``/bench/trivial``: a DRF view with no authentication and no query: the floor of the stack
  (uvicorn + Django + DRF + JSON rendering) that the status endpoint is compared with.
- ``/bench/trivial-auth``: the same view behind the API's token authentication (one query), to
  split the status endpoint's cost between authentication and its own reads.
"""

from __future__ import annotations

from typing import Any

from django.urls import include, path
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class Trivial(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


class TrivialAuth(APIView):
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"ok": True})


urlpatterns = [
    path("bench/trivial", Trivial.as_view()),
    path("bench/trivial-auth", TrivialAuth.as_view()),
    path("", include("config.urls")),
]

handler404 = "documents.site_errors.not_found"
handler500 = "documents.site_errors.server_error"
