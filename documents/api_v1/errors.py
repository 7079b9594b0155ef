"""Errors of ``/v1/`` in the OpenAI shape: ``{"error": {"message", "type", "param", "code"}}``.

The ``/api/`` handler decides status, code and the user-safe message (nothing internal leaks);
this module only reshapes its answer, so both APIs refuse the same things the same way.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from rest_framework.response import Response

from documents.api.errors import handle_exception
from documents.services.collections import CollectionInputError
from documents.services.files import FileInputError

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
    500: "server_error",
}


def openai_error(http_status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    kind = _TYPES.get(http_status, "invalid_request_error" if http_status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class V1Error(Exception):
    """A refusal of a /v1 view with its status, code, message and parameter."""

    def __init__(self, http_status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.http_status, self.code, self.message, self.param = http_status, code, message, param


def not_found(what: str, ident: Any) -> V1Error:
    # Another tenant's id answers exactly like an unknown one.
    return V1Error(404, "not_found", f"No {what} found with id '{str(ident)[:80]}'.", None)


def _param_of(detail: Any) -> str | None:
    if isinstance(detail, dict) and detail:
        first = next(iter(detail))
        return str(first)
    return None


def handle_v1_exception(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The /api handler's decision, in the OpenAI error shape."""
    if isinstance(exc, V1Error):
        return Response(openai_error(exc.http_status, exc.code, exc.message, exc.param), exc.http_status)
    if isinstance(exc, FileInputError):
        return Response(openai_error(exc.http_status, exc.code, exc.message, exc.param), exc.http_status)
    if isinstance(exc, CollectionInputError):
        return Response(openai_error(400, exc.code, exc.message, exc.field), 400)
    response = handle_exception(exc, context)
    if response is None:
        return None
    inner = (response.data or {}).get("error", {})
    code = str(inner.get("code", "error"))
    message = str(inner.get("message", code))
    detail = inner.get("detail")
    param = _param_of(detail)
    if param and isinstance(detail, dict) and isinstance(detail[param], list) and detail[param]:
        message = f"{message} {param}: {detail[param][0]}" if code == "invalid" else message
    response.data = openai_error(response.status_code, code, message, param)
    return response


def v1_json_error(request: HttpRequest, http_status: int, code: str, message: str) -> JsonResponse:
    """The shape for answers made outside DRF (the URL resolver's 404, a 500)."""
    return JsonResponse(openai_error(http_status, code, message), status=http_status)
