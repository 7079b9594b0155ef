"""The API's own refusal (status, stable code, user-safe message, optional detail), a leaf that
input checks and views raise and ``documents.api.errors`` renders in the one error shape."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions


class ApiError(exceptions.APIException):
    """An API error with its own code and message, e.g. a refused cancel (409)."""

    def __init__(self, http_status: int, code: str, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.status_code = http_status
        self.code = code
        self.message = message
        self.extra = detail
