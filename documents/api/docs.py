"""The OpenAPI schema and its docs page, behind the API's login: a browser without a session is
sent to the login page (and back afterwards); an API client gets the API's JSON error."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse, JsonResponse
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.views import APIView

from documents.api.errors import handle_exception


def wants_html(request: Request) -> bool:
    """A browser navigating here names text/html; API clients (``*/*``, JSON) do not."""
    accept = request.META.get("HTTP_ACCEPT", "")
    return any(part.split(";")[0].strip().lower() == "text/html" for part in accept.split(","))


class LoginRequired(APIView):
    """For views whose renderers are not JSON (YAML, the Swagger page): refused callers get a
    redirect to the login page (browsers) or the one JSON error shape (API clients)."""

    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            if wants_html(self.request):
                return redirect_to_login(self.request.get_full_path())
            answer = handle_exception(exc, {"view": self, "request": self.request})
            assert answer is not None
            response = JsonResponse(answer.data, status=answer.status_code)
            if "WWW-Authenticate" in answer:
                response["WWW-Authenticate"] = answer["WWW-Authenticate"]
            return response
        return super().handle_exception(exc)


class SchemaView(LoginRequired, SpectacularAPIView):
    pass


class DocsView(LoginRequired, SpectacularSwaggerView):
    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The page is HTML only: a JSON client is told it must authenticate, not "406".
        return super().perform_content_negotiation(request, force=True)
