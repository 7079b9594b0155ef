"""One error shape for every API answer that is not a success:
``{"error": {"code": ..., "message": ..., "detail": ...?}}`` (``ErrorOutEnvelope`` in
``documents/api/output.py`` renders it). Nothing internal leaks. The code is stable English; the
message and the detail's messages are in the request's language, both of them."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import Http404
from django.utils.translation import gettext_noop
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from documents.api.output import error_body
from documents.api.refusal import ApiError
from documents.engines.validation import UploadRejected
from documents.retrieval.filters import FilterError
from documents.services.attributes import DocumentInputError
from documents.texts import localize
from jobs.errors import JobConflict

log = logging.getLogger(__name__)

_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "file_too_large",
    415: "unsupported_media_type",
    429: "throttled",
    500: "internal_error",
}
_MESSAGES = {
    401: gettext_noop("Authentication is required: send a token or log in."),
    403: gettext_noop("You do not have access to this."),
    404: gettext_noop("Not found."),
    405: gettext_noop("This method is not allowed here."),
    500: gettext_noop("Something went wrong on our side. It has been logged; try again later."),
}


def error_response(http_status: int, code: str, message: str, detail: Any = None) -> Response:
    return Response(error_body(code, message, detail), status=http_status)


def handle_exception(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler, reshaped into the one error shape."""
    if isinstance(exc, ApiError):
        return error_response(exc.status_code, exc.code, exc.message, exc.extra)
    if isinstance(exc, UploadRejected):
        return error_response(exc.http_status, str(exc.code), exc.message)
    if isinstance(exc, DocumentInputError):
        return error_response(exc.http_status, exc.code, exc.message, {exc.field: [localize(exc.message)]})
    if isinstance(exc, FilterError):
        said = {exc.field: [localize(exc.message)]}
        return error_response(status.HTTP_400_BAD_REQUEST, exc.code, exc.message, said)
    if isinstance(exc, JobConflict):
        return error_response(status.HTTP_409_CONFLICT, exc.code, exc.message)
    if isinstance(exc, Http404):
        return error_response(404, "not_found", _MESSAGES[404])
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "request_too_large", gettext_noop("The request body is too large."))
    if isinstance(exc, TooManyFieldsSent):
        return error_response(400, "too_many_fields", gettext_noop("The request has too many form fields."))
    response = exception_handler(exc, context)
    if response is None:
        log.exception("unhandled API error", exc_info=exc)
        return error_response(500, "internal_error", _MESSAGES[500])
    code = _CODES.get(response.status_code, "error")
    detail = None
    if isinstance(exc, exceptions.ValidationError):
        code, message, detail = (
            "invalid",
            gettext_noop("The request is not valid."),
            _localized(response.data),
        )
    elif isinstance(exc, exceptions.Throttled):
        message = gettext_noop("Too many requests. Try again later.")
    elif isinstance(exc, exceptions.AuthenticationFailed):
        # A token was sent and refused: documents/api/auth.py says why ("send a token" would send
        # the caller looking for a header they did send).
        message = str(exc.detail)
    else:
        message = _MESSAGES.get(response.status_code) or str(getattr(exc, "detail", "")) or code
    reshaped = error_response(response.status_code, code, message, detail)
    for header in ("WWW-Authenticate", "Retry-After", "Allow"):
        if header in response:
            reshaped[header] = response[header]
    return reshaped


def _localized(detail: Any) -> Any:
    """A validation error's field messages in the request's language. DRF's own are translated
    already; the project's (English msgids in the catalogue) are translated here."""
    if isinstance(detail, dict):
        return {key: _localized(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_localized(item) for item in detail]
    return localize(detail) if isinstance(detail, str) else detail
