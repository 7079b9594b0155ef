"""Read a large request body only for an authenticated request.

The server does not read an upload ahead (config/dispatch.py): the view reads it from the
connection. Django's CSRF check reads a form's fields (and so spools its files to temporary files)
before a page view's login check runs, so an anonymous client holding a CSRF cookie could still
have its upload spooled. This middleware, placed before ``CsrfViewMiddleware``, refuses a body
larger than the server's read-ahead for any view that is not authenticated by the time its
middleware runs, unless the view authenticates before it reads (the API's views are
``csrf_exempt`` DRF views: they check the token first and read the body only when it is good).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from config.dispatch import DISPATCH_READ_AHEAD_BYTES


class BodyAfterAuthenticationMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        if not _large_body(request) or getattr(view_func, "csrf_exempt", False):
            return None
        if request.user.is_authenticated:
            return None
        return JsonResponse(
            {"error": {"code": "not_authenticated", "message": "Sign in before uploading."}},
            status=401,
        )


def _large_body(request: HttpRequest) -> bool:
    if "HTTP_TRANSFER_ENCODING" in request.META:
        return True
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) > DISPATCH_READ_AHEAD_BYTES
    except ValueError:
        return True
