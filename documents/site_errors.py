"""The site's 404 and 500 answers (``handler404`` / ``handler500``): the JSON error shape of
``/api`` (and ``/metrics``), the OpenAI shape of ``/v1``, Django's HTML pages elsewhere. Both
API modules decide their own shapes; this module only picks one by path, so neither imports the
other's handlers."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse

from documents.api.errors import _CODES, _MESSAGES, error_body
from documents.api_v1.errors import v1_json_error


def _json_or_html(request: HttpRequest, http_status: int, html: HttpResponse) -> HttpResponse:
    if request.path.startswith("/v1/"):  # the OpenAI-compatible API: its own error shape
        return v1_json_error(request, http_status, _CODES[http_status], _MESSAGES[http_status])
    if request.path.startswith("/api/") or request.path == "/metrics":
        code = _CODES[http_status]
        return JsonResponse(error_body(code, _MESSAGES[http_status]), status=http_status)
    return html


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    from django.views.defaults import page_not_found

    return _json_or_html(request, 404, page_not_found(request, exception or Http404()))


def server_error(request: HttpRequest) -> HttpResponse:
    from django.views.defaults import server_error as django_server_error

    return _json_or_html(request, 500, django_server_error(request))
