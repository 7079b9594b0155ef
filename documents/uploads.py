"""Django's upload handler that stops an over-large upload as it streams in (the second line of
the body limit, after the ASGI middleware; the only one under a WSGI server)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler


class BodyLimitUploadHandler(FileUploadHandler):
    """Refuses a body declared over ``REQUEST_MAX_BODY_BYTES`` before parsing it, and a file
    whose bytes pass ``DOCUMENTS_MAX_UPLOAD_BYTES`` as they arrive (``413 request_too_large``)."""

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: str | None = None
    ) -> None:
        if content_length > settings.REQUEST_MAX_BODY_BYTES:
            raise RequestDataTooBig(f"request body of {content_length} bytes")

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        # One byte over the upload limit is enough to know: validation reports file_too_large
        # for files between the two, so the limit here is the body's, not the file's.
        if start + len(raw_data) > settings.REQUEST_MAX_BODY_BYTES:
            raise RequestDataTooBig("upload larger than the request body limit")
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
