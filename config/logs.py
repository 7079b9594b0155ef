"""Log filters the settings' ``LOGGING`` names."""

from __future__ import annotations

import logging


class ClientErrorsAsInfo(logging.Filter):
    """Django logs every 4xx answer at WARNING ("Not Found: /favicon.ico"): a client's mistake,
    answered to that client, not something for whoever watches the server. Such a record goes on
    at INFO, and only where its logger is enabled for INFO (``django.request`` is not, unless
    REQUEST_LOG_LEVEL says so); server errors (5xx) keep their level."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.levelno != logging.WARNING or not isinstance(status, int) or not 400 <= status < 500:
            return True
        record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)
